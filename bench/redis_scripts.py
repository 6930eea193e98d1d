"""What the two budget scripts cost Redis itself, per call, from its own ``INFO commandstats``.

    python bench/redis_scripts.py [--batches 100] [--concurrency 32]

Starts a private redis-server on a unix socket in a temp dir (pinned to CPU 1), reserves
``batches x concurrency`` requests through the Admitter with the plan of bench/full.yaml
(five checks), then settles them, and prints Redis's microseconds per EVALSHA for each
phase, next to a trivial script's, for scale. Redis time is what limits the full pipeline
once the gateway waits on it (bench/results/2026-12-02/history.md).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent


def start_redis(tmp: str) -> tuple[subprocess.Popen, str]:
    sock = os.path.join(tmp, "redis.sock")
    proc = subprocess.Popen(["taskset", "-c", "1", shutil.which("redis-server") or "redis-server", "--port", "0",
                             "--unixsocket", sock, "--save", "", "--appendonly", "no", "--dir", tmp],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not os.path.exists(sock):
        if time.monotonic() > deadline or proc.poll() is not None:
            raise SystemExit("redis-server did not start")
        time.sleep(0.02)
    return proc, sock


async def measure(sock: str, batches: int, concurrency: int) -> None:
    import redis

    from tokenward.budget import policy
    from tokenward.budget.admission import Admitter
    from tokenward.budget.redis import RedisStore
    from tokenward.config.loader import effective_plan, load_config

    cfg = load_config(BENCH_DIR / "full.yaml", environ={})
    stats = redis.Redis(unix_socket_path=sock)
    admitter = Admitter(cfg, RedisStore(f"unix://{sock}", 1.0))
    plan = effective_plan(cfg, "bench")

    def per_call() -> float:
        return stats.info("commandstats")["cmdstat_evalsha"]["usec_per_call"]

    def reserve():
        return admitter.reserve("bench", "bench", plan, "k", "bench-chat", "bench", 100, 1)

    first = await reserve()  # loads the scripts
    await admitter.settle(first.ticket, 50, 1, policy.SETTLE)
    stats.config_resetstat()
    tickets = []
    for _ in range(batches):
        tickets += [d.ticket for d in await asyncio.gather(*[reserve() for _ in range(concurrency)])]
    reserve_us = per_call()
    stats.config_resetstat()
    for i in range(0, len(tickets), concurrency):
        await asyncio.gather(*[admitter.settle(t, 50, 1, policy.SETTLE) for t in tickets[i:i + concurrency]])
    settle_us = per_call()
    await admitter.close()
    trivial = stats.script_load("return 1")
    stats.config_resetstat()
    for _ in range(2000):
        stats.evalsha(trivial, 0)
    print(f"redis-side us per EVALSHA: reserve {reserve_us:.1f}, settle {settle_us:.1f}, "
          f"trivial script {per_call():.1f}  ({len(tickets)} requests, {len(plan_checks(cfg))} checks)")


def plan_checks(cfg) -> list[str]:
    from tokenward.budget import policy
    from tokenward.budget.limits import tenant_specs
    from tokenward.config.loader import effective_plan

    return [spec.name for spec in tenant_specs(effective_plan(cfg, "bench"), "k", policy.periods(0))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tokenward-redis-") as tmp:
        proc, sock = start_redis(tmp)
        try:
            asyncio.run(measure(sock, args.batches, args.concurrency))
        finally:
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    sys.exit(main())
