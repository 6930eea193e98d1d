"""What a cache miss adds, in instructions (callgrind), and which part adds what.

    python bench/cache_miss_instructions.py [--entries 1000] [--parts]

The gateway of bench/content_cost.py (the full pipeline, a stub backend) runs unique
short prompts: first with the cache off, then on (every request a miss that is stored,
the memory store full, so each store also evicts). With ``--parts`` the cache stage is
also run with parts of it switched off in this process (bench only), so the difference
between neighbouring rows prices one part:

- ``empty``: the stage is there and admits at once (what any holding stage costs: the
  runner's await, timing and release, the record's and the metrics' entry);
- ``no-key``: a miss with a counter for a key (the rest of the miss, without the key);
- ``no-store``: a miss whose answer is captured and never stored.

Each count is taken at two request counts and the difference divided by the requests
between them, so start-up cancels out. The periodic background work (the abuse batches,
the control refresh, the decision log's flush timer) is stopped before counting: it runs
per wall-clock second, and under callgrind a second is a few requests, so it would move
the count by ±15K instructions between identical runs; so is what start-up left in the
heap (``gc.freeze``). Takes ~6 minutes with --parts.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
PARTS = ("empty", "no-key", "no-store")


def _switch_off(part: str) -> None:
    import tokenward.cache.key as key_module
    import tokenward.stages.s14_cache as s85

    if part == "empty":
        async def admit(self, ctx):
            return None
        s85.CacheStage.admit = admit
    elif part == "no-key":
        counter = itertools.count()
        key_module.KeyMaker.__call__ = lambda self, tenant, body, typed=None: (f"tw:{{t:x}}:c:{next(counter):040d}", 16)
    elif part == "no-store":
        async def on_complete(self, ctx, usage):
            return None
        s85.CacheStage.on_complete = on_complete


async def _requests(cache: bool, entries: int, n: int) -> None:
    import yaml

    import content_cost
    from inproc import make_scope, one_request
    from tokenward.observe.decision_log import DecisionLog

    plain = content_cost.config

    def config(tmp: str, screening: bool, cached: bool) -> Path:
        path = plain(tmp, screening, cached)
        if cached:
            raw = yaml.safe_load(path.read_text())
            raw["cache"]["max_entries"] = entries
            path.write_text(yaml.safe_dump(raw))
        return path

    content_cost.config = config
    with tempfile.TemporaryDirectory(prefix="tw-cache-cg-") as tmp:
        gateway, key = await content_cost.start(tmp, False, cache)
        counter = itertools.count()

        async def run(count: int) -> None:
            for _ in range(count):
                body = content_cost.body("Say hello.", f" #{next(counter)}")
                await one_request(gateway, make_scope(key, body), body, [])

        await run(entries + 300 if cache else 300)   # the store full: every miss from here evicts
        DecisionLog.FLUSH_S = 1e9                    # flushed by size only, not by a timer
        me = asyncio.current_task()
        for task in asyncio.all_tasks():
            if task is not me:
                task.cancel()
        await asyncio.sleep(0)
        # what start-up and the warm-up left is moved out of the collector's sight: a full
        # collection over it (tens of millions of instructions) fell in one run and not in
        # the other often enough to move the per-request figure by several thousand
        gc.collect()
        gc.freeze()
        await run(n)
        await gateway.shutdown()


def _count(cache: bool, part: str | None, entries: int, n: int) -> int:
    argv = [sys.executable, __file__, "--child", f"{int(cache)},{part or ''},{entries},{n}"]
    env = {**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(HERE.parent / "src"), str(HERE)])}
    with tempfile.TemporaryDirectory(prefix="tw-cg-") as tmp:
        done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/cg.out", *argv],
                              capture_output=True, text=True, env=env, timeout=3600)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or not found:
        raise SystemExit(f"callgrind run failed ({done.returncode}):\n{done.stdout[-1500:]}\n{done.stderr[-1500:]}")
    return int(found.group(1))


def _per_request(cache: bool, part: str | None, entries: int, low: int, high: int) -> float:
    return (_count(cache, part, entries, high) - _count(cache, part, entries, low)) / (high - low)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=1000, help="the memory store's max_entries")
    parser.add_argument("--parts", action="store_true", help="also price the parts (three more runs)")
    parser.add_argument("--low", type=int, default=200)
    parser.add_argument("--high", type=int, default=2200)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        cache, part, entries, n = args.child.split(",")
        sys.path.insert(0, str(HERE))
        if part:
            _switch_off(part)
        asyncio.run(_requests(cache == "1", int(entries), int(n)))
        return
    runs = [(False, None), (True, None)] + ([(True, part) for part in PARTS] if args.parts else [])
    with ThreadPoolExecutor(2) as pool:   # two callgrind runs at a time: one per CPU
        counts = list(pool.map(lambda run: _per_request(*run, args.entries, args.low, args.high), runs))
    off = counts[0]
    print(f"cache off: {off:,.0f} instructions per request; a miss ({args.entries:,}-entry store): "
          f"{counts[1]:,.0f} ({counts[1] - off:+,.0f})")
    for (_, part), count in zip(runs[2:], counts[2:]):
        print(f"  with the cache stage {part:9}: {count:,.0f} ({count - off:+,.0f} over the cache off)")


if __name__ == "__main__":
    main()
