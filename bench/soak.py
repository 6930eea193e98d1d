"""Soak: the full pipeline (keys, plan, validation, Redis budgets) under wrk for several
rounds, watching what would grow if something leaked.

    python bench/soak.py [--rounds 8] [--seconds 30] [--conns 32]

After each round it prints the gateway's resident memory and open file descriptors and
Redis's used memory and key count; at the end, what the run left in Redis (open leases,
reservation records, held gauges: all zero, or a reservation leaked). A leak shows as a
column that keeps climbing round after round; a warm-up step in the first rounds is not one.
Pinned like overhead.py: gateway on CPU 0, backend, wrk and redis on CPU 1.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Procs, raise_fd_limit, require, run_wrk, run_main  # noqa: E402
from overhead import CHAT, left_in_redis, probe, start_backend, start_gateway, start_redis, write_config  # noqa: E402


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def _redis(sock: Path, *args: str) -> str:
    return subprocess.run(["redis-cli", "-s", str(sock), *args], capture_output=True, text=True).stdout


def _redis_memory(sock: Path) -> int:
    info = _redis(sock, "info", "memory")
    return next(int(line.split(":")[1]) for line in info.splitlines() if line.startswith("used_memory:"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--conns", type=int, default=32)
    args = parser.parse_args()
    require("wrk")
    require("redis-server")
    raise_fd_limit()
    with tempfile.TemporaryDirectory(prefix="tokenward-soak-") as tmp_name:
        tmp = Path(tmp_name)
        with Procs(tmp, deadline_s=args.rounds * (args.seconds + 30) + 120) as procs:
            backend, backend_url = start_backend(procs, 20)
            store_url = start_redis(procs, tmp)
            config = write_config("full", tmp, backend_url, store_url)
            gateway, url = start_gateway(procs, config, None, None)
            key = probe(url, None, config, tmp)
            sock = tmp / "redis.sock"
            print(f"{'round':>5} {'req/s':>8} {'errors':>6} {'gw rss KiB':>10} {'gw fds':>6} "
                  f"{'redis bytes':>11} {'redis keys':>10}")
            for round_no in range(1, args.rounds + 1):
                result = run_wrk(url + CHAT, args.conns, args.seconds, {"BENCH_API_KEY": key or ""})
                fds = len(os.listdir(f"/proc/{gateway.pid}/fd"))
                keys = int(_redis(sock, "dbsize").strip() or 0)
                print(f"{round_no:>5} {result['rps']:>8.0f} {result['errors']:>6} {_rss_kib(gateway.pid):>10} "
                      f"{fds:>6} {_redis_memory(sock):>11} {keys:>10}", flush=True)
            left = left_in_redis(sock)
            print(f"left in redis: {left['open_leases']} open leases, {left['reservation_records']} reservation "
                  f"records, gauges held: {', '.join(left['gauges_held']) or 'none'}")


if __name__ == "__main__":
    run_main(main, "soak")
