"""What the abuse signals and operator controls cost per request, part by part (issue 18).

    python bench/abuse_cost.py [--requests 200000]

Runs one real request through the full pipeline (bench/full.yaml, abuse signals on, the
inproc stub upstream), keeps its context, then times on it, in process CPU:

- the observer (abuse/observe.py): the hot path's share of the signals, per decision;
- the control stage (stages/s07_control.py): admit and release with nothing in force;
- a batch (abuse/engine.py ``flush``) of that many observations, per observation: the
  work done off the request path, in the same process, once a second.

bench/inproc.py prices the whole request with and without them (bench/results/2026-12-02/history.md;
the status row is in docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import inproc  # noqa: E402


def _best(fn, n: int, rounds: int = 5) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        fn(n)
        best = min(best, (time.process_time() - started) / n)
    return best


async def measure(gateway, args, config_path: Path) -> None:
    inproc.stub_pools(gateway, 0)
    body = inproc.BODY
    api_key = await inproc.key_if_needed(gateway, inproc.make_scope(None, body), body, config_path)
    scope = inproc.make_scope(api_key, body)
    captured = {}
    finish = gateway.runner._finish
    gateway.runner._finish = lambda ctx: (captured.setdefault("ctx", ctx), finish(ctx))
    await inproc.one_request(gateway, scope, body, [])
    ctx = captured["ctx"]
    engine = gateway.parts.abuse
    observer = engine.observer
    stage = next(s for s in gateway.parts.stages if s.name == "control")
    n = args.requests

    def observe(count: int) -> None:
        for _ in range(count):
            observer(ctx)
            if len(observer.buffer) >= 40_000:
                observer.take()
    per_observe = _best(observe, n)
    observer.take()

    async def control(count: int) -> None:
        for _ in range(count):
            await stage.admit(ctx)
            await stage.on_complete(ctx, ctx.usage)
    best = float("inf")
    for _ in range(5):
        started = time.process_time()
        await control(n)
        best = min(best, (time.process_time() - started) / n)
    per_control = best
    batch = 20_000
    best = float("inf")
    for _ in range(5):
        for _ in range(batch):
            observer(ctx)
        started = time.process_time()
        await engine.flush()
        best = min(best, (time.process_time() - started) / batch)
    print(f"observer (hot path): {per_observe * 1e9:.0f} ns per decision")
    print(f"control stage admit + release, nothing in force: {per_control * 1e9:.0f} ns per request")
    print(f"signal batch of {batch:,} observations (off the request path): {best * 1e9:.0f} ns per observation")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=200_000)
    args = parser.parse_args()
    inproc.measure = measure
    sys.argv = [sys.argv[0], "--config", "full", "--requests", str(args.requests)]
    inproc.main()


if __name__ == "__main__":
    main()
