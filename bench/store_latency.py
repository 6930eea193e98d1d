"""How long a healthy budget-store call takes under load, and what a store timeout then
refuses: the measurement behind ``store.timeout_ms``'s default (docs/budget.md).

    python bench/store_latency.py [--clients 10] [--seconds 15] [--timeouts 50,250]

The full pipeline (bench/full.yaml) against a private redis-server, ``--clients`` closed-loop
clients (this process, asyncio over loopback), the gateway on CPU 0 and backend, redis and
the clients on CPU 1, as on the 2-core host of issue 27. First a run whose store timeout
cannot fire (5 s): the admission stage's time per admitted request (the reservation's
round trip to Redis, including the wait for the event loop that a timeout also counts)
gives p50/p99/p99.9/max. Then one run per ``--timeouts`` value: how many requests were
refused ``budget_store_unavailable`` while the store was healthy. Results as JSON on
stdout (bench/results/).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Procs, machine, require, run_main  # noqa: E402
from overhead import CHAT, PROBE_BODY, probe, start_backend, start_gateway, start_redis, write_config  # noqa: E402


async def _load(url: str, key: str, clients: int, seconds: float) -> dict[str, int]:
    import httpx

    counts: dict[str, int] = {}
    stop = time.monotonic() + seconds
    headers = {"authorization": f"Bearer {key}", "content-type": "application/json"}

    async def client() -> None:
        async with httpx.AsyncClient(base_url=url, timeout=10.0) as http:
            while time.monotonic() < stop:
                resp = await http.post(CHAT, content=PROBE_BODY, headers=headers)
                code = "ok" if resp.status_code == 200 else resp.json().get("error", {}).get("code", "?")
                counts[code] = counts.get(code, 0) + 1

    await asyncio.gather(*(client() for _ in range(clients)))
    return counts


def _quantiles(values: list[float]) -> dict[str, float]:
    values = sorted(values)
    if not values:
        return {}
    pick = lambda q: values[min(int(q * len(values)), len(values) - 1)]   # noqa: E731
    return {"n": len(values), "p50_ms": pick(0.5) / 1000, "p90_ms": pick(0.9) / 1000, "p99_ms": pick(0.99) / 1000,
            "p99_9_ms": pick(0.999) / 1000, "max_ms": values[-1] / 1000}


def _run(args, timeout_ms: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="tokenward-storelat-") as name, \
            Procs(Path(name), deadline_s=args.seconds + 120) as procs:
        tmp = Path(name)
        _, backend_url = start_backend(procs, 20)
        store_url = start_redis(procs, tmp)
        config = write_config("full", tmp, backend_url, store_url)
        raw = yaml.safe_load(config.read_text())
        raw["store"]["timeout_ms"] = timeout_ms
        config.write_text(yaml.safe_dump(raw, sort_keys=False))
        _, url = start_gateway(procs, config, None, None)
        key = probe(url, None, config, tmp)
        os.sched_setaffinity(0, {1})
        counts = asyncio.run(_load(url, key, args.clients, args.seconds))
        time.sleep(0.3)
        admission = [r["stages_us"]["admission"] for r in map(json.loads, (tmp / "decisions.jsonl").read_text()
                                                              .splitlines()) if r.get("status") == 200
                     and "admission" in r.get("stages_us", {})]
        return {"timeout_ms": timeout_ms, "answers": counts, "admission_stage": _quantiles(admission)}


def _machine() -> dict:
    """harness.machine() without wrk (not needed here, and not always installed)."""
    try:
        return machine()
    except FileNotFoundError:
        import platform

        return {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--timeouts", default="50,250")
    args = parser.parse_args()
    require("redis-server")
    runs = [_run(args, 5000)] + [_run(args, int(t)) for t in args.timeouts.split(",") if t]
    print(json.dumps({"machine": _machine(), "clients": args.clients, "seconds": args.seconds, "runs": runs},
                     indent=2))


if __name__ == "__main__":
    run_main(main, "store_latency")
