"""Fairness under a burst: tenant A bursts while tenant B sends ordinary interactive work
against one service capacity, through a real gateway process, in real time.

    python bench/fairness.py [--seconds 40] [--store memory|redis://...]

Two runs: one with a single shared pool (``capacity.local.tokens_per_minute`` only) and
one with per-tenant shares plus the shared reserve (``shares: {a: 0.3, b: 0.2}``). Both
tenants' own plans are far larger than the capacity, so only the capacity decides. A
client refused with 429 waits the Retry-After it was given (plus 0-50 ms of jitter) and
tries again, up to 6 times. Reported for B: the share of its offered work admitted within
the run, the p50 / p99 delay from a request's first try to its admission (the queueing
the gateway imposes, since it keeps no queue), and how many tries were refused; for A,
what it got through. The backend is the bundled mock (``tokenward.mock``) in this process;
the gateway is ``python -m tokenward serve`` (its own process); the load is aiohttp.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from tokenward.mock.server import start_mock, stop_mock  # noqa: E402

CAPACITY = 30_000                    # tokens a minute: 500 a second
A_RATE, A_MAX_TOKENS = 100, 20       # A: 100 requests a second of 22 tokens (4.4x the capacity)
B_RATE, B_MAX_TOKENS = 2, 40         # B: 2 requests a second of 42 tokens (a sixth of it)
TRIES = 6


def config(mock_port: int, tmp: Path, shares: bool, store: str) -> Path:
    capacity: dict = {"tokens_per_minute": CAPACITY}
    if shares:
        capacity["shares"] = {"a": 0.3, "b": 0.2}
    plan = {"models": ["small-chat"], "max_output_tokens": 256, "tokens_per_minute": 10_000_000,
            "requests_per_minute": 1_000_000, "max_concurrent_streams": 0}
    raw = {"upstreams": {"mock": {"base_url": f"http://127.0.0.1:{mock_port}/v1"}},
           "models": {"small-chat": {"upstream": "mock", "context_window": 8192}},
           "plans": {"big": plan}, "tenants": {"a": {"plan": "big"}, "b": {"plan": "big"}},
           "capacity": {"mock": capacity}, "store": {"url": store},
           "keystore": {"url": f"sqlite:///{tmp}/keys.db"}, "logging": {"decisions": "off", "level": "warning"}}
    path = tmp / ("shares.yaml" if shares else "pool.yaml")
    path.write_text(yaml.safe_dump(raw))
    return path


def key(path: Path, tenant: str) -> str:
    out = subprocess.run([sys.executable, "-m", "tokenward", "keys", "create", "--config", str(path), "--tenant",
                          tenant], capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    return out.stdout.strip()


def serve(path: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "tokenward", "serve", "--config", str(path), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    line = proc.stdout.readline()
    if "listening on" not in line:
        proc.kill()
        raise RuntimeError(f"gateway did not start: {line!r}")
    return proc, line.split("listening on ", 1)[1].strip()


async def client(session: aiohttp.ClientSession, url: str, api_key: str, max_tokens: int, rng: random.Random,
                 out: dict) -> None:
    body = {"model": "small-chat", "prompt": "go", "max_tokens": max_tokens}
    headers = {"authorization": f"Bearer {api_key}"}
    first = time.monotonic()
    for _ in range(TRIES):
        async with session.post(url + "/v1/completions", json=body, headers=headers) as resp:
            await resp.read()
            if resp.status == 200:
                out["delays"].append(time.monotonic() - first)
                out["admitted"] += 1
                return
            out["refused"] += 1
            wait = resp.headers.get("retry-after")
            if resp.status != 429 or wait is None:
                break
        await asyncio.sleep(float(wait) + rng.random() * 0.05)
    out["gave_up"] += 1


async def load(url: str, keys: dict[str, str], seconds: float) -> dict:
    rng = random.Random(1)
    out = {t: {"delays": [], "admitted": 0, "refused": 0, "gave_up": 0, "offered": 0} for t in "ab"}
    tasks: list[asyncio.Task] = []
    connector = aiohttp.TCPConnector(limit=400)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as session:
        start = time.monotonic()
        sent = {"a": 0, "b": 0}
        while (now := time.monotonic() - start) < seconds:
            for tenant, rate, max_tokens in (("a", A_RATE, A_MAX_TOKENS), ("b", B_RATE, B_MAX_TOKENS)):
                due = int(now * rate) + 1 - sent[tenant]
                for _ in range(max(due, 0)):
                    sent[tenant] += 1
                    out[tenant]["offered"] += 1
                    tasks.append(asyncio.ensure_future(client(session, url, keys[tenant], max_tokens, rng,
                                                              out[tenant])))
            await asyncio.sleep(0.005)
        await asyncio.gather(*tasks)
    return out


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(p / 100 * len(ordered))) - 1))] if ordered else 0.0


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--store", default="memory")
    args = parser.parse_args()
    server, port, _ = await start_mock("127.0.0.1", 0)
    results = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for mode, shares in (("single shared pool", False), ("shares a 0.3, b 0.2 + reserve 0.5", True)):
                path = config(port, Path(tmp), shares, args.store)
                keys = {t: await asyncio.to_thread(key, path, t) for t in "ab"}
                proc, url = await asyncio.to_thread(serve, path)
                await asyncio.sleep(0.5)
                try:
                    results[mode] = await load(url, keys, args.seconds)
                finally:
                    proc.terminate()
                    proc.wait(10)
    finally:
        await stop_mock(server)
    report(results, args)


def report(results: dict, args) -> None:
    print(f"capacity {CAPACITY:,} tokens/min; A {A_RATE}/s x {A_MAX_TOKENS + 2} tokens, B {B_RATE}/s x "
          f"{B_MAX_TOKENS + 2} tokens; {args.seconds:g} s per run; store {args.store}")
    print(f"{'capacity':36} {'B admitted':>10} {'B p50 s':>8} {'B p99 s':>8} {'B refused':>9} {'B gave up':>9} "
          f"{'A admitted':>10} {'A gave up':>9}")
    summary = {}
    for mode, out in results.items():
        a, b = out["a"], out["b"]
        row = {"b_admitted_share": round(b["admitted"] / max(b["offered"], 1), 3),
               "b_p50_s": round(percentile(b["delays"], 50), 3), "b_p99_s": round(percentile(b["delays"], 99), 3),
               "b_refused_tries": b["refused"], "b_gave_up": b["gave_up"],
               "a_admitted_share": round(a["admitted"] / max(a["offered"], 1), 3), "a_gave_up": a["gave_up"]}
        summary[mode] = row
        print(f"{mode:36} {row['b_admitted_share']:>10.1%} {row['b_p50_s']:>8.3f} {row['b_p99_s']:>8.3f} "
              f"{b['refused']:>9} {b['gave_up']:>9} {row['a_admitted_share']:>10.1%} {a['gave_up']:>9}")
    print(json.dumps(summary))


if __name__ == "__main__":
    asyncio.run(main())
