"""Where a request's CPU goes, stage by stage, in-process: the floor under a cache hit and
under screening.

    taskset -c 1 python bench/stage_split.py [--requests 3000] [--rounds 3]

The gateway of bench/content_cost.py (the full pipeline, memory store, a stub backend)
runs four pairs, short ("Say hello.") and 2 KB prompts, each prompt unique unless it is a
hit:

- ``forward`` (cache off) against ``hit`` (cache on, the same prompt every time);
- ``off`` (screening off) against ``standard`` (injection heuristic, PII tokenize).

For each it prints the process CPU per request and each stage's own time (the runner's
per-stage clock, as the metrics keep it; ``forward`` includes the stub backend's reply
and the answer's way out, ``answer`` a hit's replay). What the stages do not cover (the
request cycle, the decision record, the metrics, the release of what the stages took) is
the CPU per request less their sum. A hit cannot cost less than the stages before the
cache plus that remainder, whatever the cache itself costs: that is the floor
``docs/benchmarks.md`` gives for the hit bar of #16. The least CPU of each variant over
the rounds is kept (other load only ever adds).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import content_cost as cc  # noqa: E402
from inproc import make_scope, one_request  # noqa: E402

BEFORE_CACHE = ("edge", "identity", "entitlement", "control", "validation", "work", "admission")


async def _run(gateway, key: str, bodies, n: int) -> tuple[float, dict[str, float]]:
    metrics = gateway.parts.metrics
    before = metrics.stage_totals()
    started = time.process_time()
    for i in range(n):
        body = bodies(i)
        await one_request(gateway, make_scope(key, body), body, [])
    cpu = (time.process_time() - started) * 1e6 / n
    per = {}
    for name, (runs, total_ns) in metrics.stage_totals().items():
        was_runs, was_ns = before.get(name, (0, 0.0))
        if runs != was_runs:
            per[name] = (total_ns - was_ns) / n / 1000
    return cpu, per


async def main(n: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="tw-split-") as tmp:
        off = await cc.start(tmp, False, False)
        cached = await cc.start(tmp, False, True)
        screened = await cc.start(tmp, True, False)
        counter = itertools.count()
        gc.collect()
        gc.freeze()     # as `tokenward serve` does once started
        for label, prompt in (("short", "Say hello."), ("2 KB", cc.PROMPT)):
            unique = lambda i, p=prompt: cc.body(p, f" #{next(counter)}")  # noqa: E731
            same = lambda i, p=prompt: cc.body(p)  # noqa: E731
            pairs = {"forward": (off, unique), "hit": (cached, same), "off": (off, unique),
                     "standard": (screened, unique)}
            best: dict[str, tuple[float, dict[str, float]]] = {}
            for (gateway, key), bodies in pairs.values():
                await _run(gateway, key, bodies, 300)
            for _ in range(rounds):
                for name, ((gateway, key), bodies) in pairs.items():
                    got = await _run(gateway, key, bodies, n)
                    if name not in best or got[0] < best[name][0]:
                        best[name] = got
            for name, (cpu, per) in best.items():
                staged = sum(per.values())
                print(f"{label:5} {name:8} CPU {cpu:6.1f} us/request; stages {staged:5.1f}, outside them "
                      f"{cpu - staged:5.1f}: " + "  ".join(f"{k} {v:.1f}" for k, v in per.items()))
            (f_cpu, f_per), (h_cpu, h_per) = best["forward"], best["hit"]
            floor = sum(h_per.get(s, 0.0) for s in BEFORE_CACHE) + (h_cpu - sum(h_per.values()))
            print(f"{label:5} hit/forward {h_cpu / f_cpu:.3f}x; the stages before the cache plus what no stage "
                  f"covers: {floor:.1f} us = {floor / f_cpu:.3f}x of a forwarded request, with a free look-up "
                  f"and answer")
            print(f"{label:5} standard/off {best['standard'][0] / best['off'][0]:.3f}x; the screening stage "
                  f"{best['standard'][1].get('screening', 0.0):.1f} us")
        for gateway, _ in (off, cached, screened):
            await gateway.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.requests, args.rounds))
