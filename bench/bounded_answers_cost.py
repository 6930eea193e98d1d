"""What bounding a backend's usage and answer adds per request, in instructions (callgrind):
the full pipeline of bench/inproc.py (stub backend, no sockets) with two source trees side
by side, e.g. the commit before issue 27's lying-backend work and the one after it.

    python bench/bounded_answers_cost.py --old /tmp/tw-old --new /tmp/tw-new [--chunks 16] [--parts]

Each tree is a checkout (``git archive REV | tar -x -C DIR``); its own ``bench/inproc.py``
and ``src`` are used. A whole answer and a stream of ``--chunks`` token events are counted
at two request counts, the difference divided by the requests between them, so start-up
cancels out. As in bench/cache_miss_instructions.py, the periodic background work is
stopped, the start-up heap frozen and the collector off while counting: a timer, or a
full collection, that falls in one run and not the other moved the figure by 30-55K
instructions a request (the plain bench/instructions.py gave 582-596K and 573-630K for the
same two trees; with the timers stopped but the collector on, +35K whole and -55K
streamed). So the figure leaves out the collector's share, and still moves by tens of
thousands between runs. ``--parts`` counts what the change adds, alone and exactly: one
token event split and accounted (old and new, per event) and a request's answer limit and
usage clamp (new only: the old tree has neither).
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


async def _child(tree: Path, chunks: int, n: int) -> None:
    import yaml

    sys.path[:0] = [str(tree / "bench"), str(tree / "src")]
    import inproc
    from tokenward.app import Gateway
    from tokenward.config import load_config
    from tokenward.observe.decision_log import DecisionLog

    with tempfile.TemporaryDirectory(prefix="tw-bounded-") as tmp:
        raw = yaml.safe_load((tree / "bench" / "full.yaml").read_text())
        raw["upstreams"]["bench"]["base_url"] = "http://127.0.0.1:9/v1"
        raw["keystore"]["cache_ttl_s"] = 3600.0
        raw["logging"]["decisions"] = os.path.join(tmp, "decisions.jsonl")
        raw["keystore"]["url"] = f"sqlite:///{tmp}/keys.db"
        path = Path(tmp) / "gateway.yaml"
        path.write_text(yaml.safe_dump(raw))
        gateway = Gateway(load_config(path))
        ticks = itertools.count(1_800_000_000_000)
        gateway.parts.clock = lambda: next(ticks) / 1000
        await gateway.startup()
        inproc.stub_pools(gateway, chunks)
        body = inproc.BODY if not chunks else inproc.BODY[:-1] + b',"stream":true}'
        key = await inproc.key_if_needed(gateway, inproc.make_scope(None, body), body, path)
        scope = inproc.make_scope(key, body)
        sink: list = []
        await inproc.one_request(gateway, scope, body, sink)
        assert inproc._status(sink) == 200, sink[:1]
        for _ in range(300):
            await inproc.one_request(gateway, scope, body, [])
        DecisionLog.FLUSH_S = 1e9
        me = asyncio.current_task()
        for task in asyncio.all_tasks():
            if task is not me:
                task.cancel()
        await asyncio.sleep(0)
        gc.collect()
        gc.freeze()
        gc.disable()   # a collection falls at a different request in each tree: ±30-50K a request
        for _ in range(n):
            await inproc.one_request(gateway, scope, body, [])
        await gateway.shutdown()


CHUNK = (b'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,'
         b'"model":"bench-chat","choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}]}\n\n')


def _parts(tree: Path, part: str, n: int) -> None:
    """``n`` runs of one part of the per-request work, alone (``--parts``)."""
    sys.path[:0] = [str(tree / "src")]
    from types import SimpleNamespace

    from tokenward.reconcile.stream_usage import StreamUsage
    from tokenward.reconcile.usage import Usage
    from tokenward.upstream.sse import SseSplitter

    if part == "sse":      # one token event split and accounted: what every streamed event pays
        account = StreamUsage()
        for _ in range(n):
            for event in SseSplitter().feed(CHUNK):
                account.observe(event)
        return
    import msgspec

    from tokenward.pipeline.results import Reservation, Work
    from tokenward.reconcile.bounds import answer_limit
    from tokenward.upstream.usage_report import bounded
    from tokenward.validation.schemas import ChatCompletionRequest

    body = msgspec.json.decode(b'{"model":"bench-chat","messages":[{"role":"user","content":"Say hello."}],'
                               b'"max_tokens":16}', type=ChatCompletionRequest)
    work = Work(input_tokens=30, max_output_tokens=16, reserve_tokens=46)
    ctx = SimpleNamespace(work=work, reservation=Reservation("r", "t", 46), notes={"budget": {}},
                          request=SimpleNamespace(body=body))
    usage = Usage(12, 9, "reported")
    from tokenward.observe.metrics import GatewayMetrics

    target = SimpleNamespace(upstream_name="bench", metrics=GatewayMetrics())   # the upstream counted against
    if part == "empty":    # the loop alone, to take off
        for _ in range(n):
            pass
        return
    for _ in range(n):     # what a request adds: its answer's limit and its usage clamped
        answer_limit(ctx, 8192, 65536)
        bounded(ctx, target, usage)


def _count(tree: Path, chunks: int | str, n: int) -> int:
    argv = [sys.executable, __file__, "--child", f"{tree},{chunks},{n}"]
    env = {**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory(prefix="tw-cg-") as tmp:
        done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/cg.out", *argv],
                              capture_output=True, text=True, env=env, timeout=3600)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or not found:
        raise SystemExit(f"callgrind run failed ({done.returncode}):\n{done.stdout[-1500:]}\n{done.stderr[-1500:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", type=Path, required=False)
    parser.add_argument("--new", type=Path, required=False)
    parser.add_argument("--chunks", type=int, default=16, help="token events of the streamed request")
    parser.add_argument("--low", type=int, default=100)
    parser.add_argument("--high", type=int, default=600)
    parser.add_argument("--parts", action="store_true", help="count the added parts alone instead")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        tree, chunks, n = args.child.split(",")
        if chunks in ("sse", "bounds", "empty"):
            _parts(Path(tree), chunks, int(n))
        else:
            asyncio.run(_child(Path(tree), int(chunks), int(n)))
        return
    if args.parts:
        runs = [(args.old, "sse"), (args.new, "sse"), (args.new, "bounds"), (args.new, "empty")]
        with ThreadPoolExecutor(2) as pool:
            per = list(pool.map(lambda run: (_count(*run, 20_000) - _count(*run, 2_000)) / 18_000, runs))
        print(f"one token event split and accounted: old {per[0]:,.0f}, new {per[1]:,.0f} instructions "
              f"({per[1] - per[0]:+,.0f})")
        print(f"a request's answer limit and usage clamp (new): {per[2] - per[3]:,.0f} instructions")
        return
    runs = [(tree, chunks, n) for tree in (args.old, args.new) for chunks in (0, args.chunks)
            for n in (args.low, args.high)]
    with ThreadPoolExecutor(2) as pool:   # two callgrind runs at a time: one per CPU
        counts = dict(zip(runs, pool.map(lambda run: _count(*run), runs)))
    for chunks in (0, args.chunks):
        per = {tree: (counts[(tree, chunks, args.high)] - counts[(tree, chunks, args.low)]) / (args.high - args.low)
               for tree in (args.old, args.new)}
        what = "whole answer" if not chunks else f"stream of {chunks} events"
        print(f"{what}: old {per[args.old]:,.0f}, new {per[args.new]:,.0f} instructions per request "
              f"({per[args.new] - per[args.old]:+,.0f}, {100 * (per[args.new] / per[args.old] - 1):+.2f}%)")


if __name__ == "__main__":
    main()
