"""Wall latency of the classifier through ``screen()`` (its worker thread), as the policy's
budget sees it, on the 2 KB prompt of bench/injection_eval.py.

    taskset -c 0 python3 bench/screening_latency.py [--calls 300] [--window 256] [--threads 0]
    taskset -c 0,1 python3 bench/screening_latency.py ...

Each call is one ``await detector.screen([prompt])`` on a running event loop, timed with
``perf_counter`` from the call to the result (the thread pool's queueing included), one
after another, after 10 warm-up calls; a ticker task on the loop measures how late the
event loop runs meanwhile (its worst lag: scoring off the loop keeps it small). Prints the
token count and windows per text, p50 / p99 / max, and how many calls the default budget
(config.content.DEFAULT_TIMEOUT_MS["classifier"]) would have failed.

``--window N`` reads texts in N-token windows (the shipped model reads 256); ``--threads
N`` sets onnxruntime's intra-op threads (0: its default, one per core it sees).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

import argparse  # noqa: E402
import asyncio  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402

from bench.injection_eval import PROMPT_2KB  # noqa: E402


async def measure(detector, prompt: str, calls: int) -> tuple[list[float], float]:
    lag = 0.0
    running = True

    async def ticker() -> None:
        nonlocal lag
        while running:
            before = time.perf_counter()
            await asyncio.sleep(0.001)
            lag = max(lag, time.perf_counter() - before - 0.001)

    for _ in range(10):
        await detector.screen([prompt])
    tick = asyncio.create_task(ticker())
    out = []
    for _ in range(calls):
        started = time.perf_counter()
        await detector.screen([prompt])
        out.append((time.perf_counter() - started) * 1000)
    running = False
    await tick
    return out, lag * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--window", type=int, default=0, help="tokens per window (0: the model's 256)")
    parser.add_argument("--threads", type=int, default=0, help="onnxruntime intra-op threads (0: default)")
    args = parser.parse_args()

    from tokenward.config.content import DEFAULT_TIMEOUT_MS
    from tokenward.screening import classifier
    from tokenward.screening.classifier import ClassifierInjection

    if args.threads:
        import onnxruntime

        made = onnxruntime.SessionOptions

        def options() -> onnxruntime.SessionOptions:
            o = made()
            o.intra_op_num_threads = args.threads
            return o
        onnxruntime.SessionOptions = options
    detector = ClassifierInjection()
    if args.window:
        detector.encoder.max_tokens = args.window
    windows = detector.encoder.windows([PROMPT_2KB])[0]
    budget = DEFAULT_TIMEOUT_MS["classifier"]
    times, lag = asyncio.run(measure(detector, PROMPT_2KB, args.calls))
    times.sort()
    p50, p99 = times[len(times) // 2], times[min(len(times) - 1, int(len(times) * 0.99))]
    cpus = sorted(os.sched_getaffinity(0))
    print(f"cpus {cpus}, runtime {detector.encoder.runtime}, window {detector.encoder.max_tokens} tokens, "
          f"ort threads {args.threads or 'default'}, 2 KB prompt: {sum(len(w) - 2 for w in windows)} tokens "
          f"in {len(windows)} windows (MAX_WINDOWS {classifier.MAX_WINDOWS})")
    print(f"screen() wall over {args.calls} calls: p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {times[-1]:.1f} ms; "
          f"over the default budget ({budget:.0f} ms): {sum(t > budget for t in times)}; "
          f"worst event-loop lag meanwhile {lag:.1f} ms")
    detector.close()


if __name__ == "__main__":
    main()
