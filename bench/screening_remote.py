"""``detector: http`` (screening/remote.py) against a real classification service process:
what micro-batching and the verdict cache save.

    python3 bench/screening_remote.py [--rounds 20]

The service is tests/screening/classify_server.py (vLLM's ``/classify`` shape, a thread per
connection, no model: it answers in well under a millisecond, so the figures are the
gateway side's own cost, the batch window and the calls it makes, not a model's time). For each number of concurrent
requests (1, 8, 32) and each ``batch_window_ms`` (0.001: practically no window; 2, the
default; 10), ``rounds`` bursts of distinct ~150-character texts: HTTP calls per screened
text, and the wall time of one ``screen`` (p50 / p99, from the call to the verdict). Then
the verdict cache: the same texts screened again (every verdict a hit), and a
conversation of 10 turns whose earlier turns are resent each time (as chat clients do).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

import argparse  # noqa: E402
import asyncio  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

from tokenward.config.content import HttpDetector  # noqa: E402
from tokenward.screening.remote import RemoteInjection  # noqa: E402

SERVER = ROOT / "tests" / "screening" / "classify_server.py"


def pct(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


async def timed(screener: RemoteInjection, texts: list[str]) -> float:
    started = time.perf_counter()
    await screener.screen(texts)
    return (time.perf_counter() - started) * 1000


async def bursts(url: str, concurrency: int, window_ms: float, rounds: int) -> str:
    screener = RemoteInjection(HttpDetector(url=url, model="m", batch_window_ms=window_ms))
    await screener.screen(["warm up"])
    calls0, times = screener.calls, []
    for r in range(rounds):
        texts = [f"round {r} request {i}: summarise the attached quarterly notes for the leadership team, "
                 f"keep it short and list the open questions ({window_ms})" for i in range(concurrency)]
        times += await asyncio.gather(*(timed(screener, [t]) for t in texts))
    calls = screener.calls - calls0
    p50, p99 = pct(times)
    await screener.aclose()
    return (f"  {concurrency:>3} concurrent, batch_window_ms {window_ms:>5}: {calls / (rounds * concurrency):.3f} calls "
            f"per text ({calls} for {rounds * concurrency}), screen() wall p50 {p50:.2f} ms, p99 {p99:.2f} ms")


async def cache(url: str, rounds: int) -> list[str]:
    screener = RemoteInjection(HttpDetector(url=url, model="m"))
    texts = [f"cached text {i}: please translate the following paragraph into French" for i in range(rounds)]
    misses = [await timed(screener, [t]) for t in texts]
    hits = [await timed(screener, [t]) for t in texts]
    calls0 = screener.calls
    turns: list[str] = ["system: you are a helpful assistant for the billing team"]
    for i in range(10):
        turns.append(f"user turn {i}: what does invoice {1000 + i} cover?")
        await screener.screen(list(turns))
        turns.append(f"assistant turn {i}: it covers the services of month {i + 1}.")
    calls, hits_n = screener.calls - calls0, screener.cache_hits
    await screener.aclose()
    return [f"  a miss (one call): p50 {pct(misses)[0]:.2f} ms, p99 {pct(misses)[1]:.2f} ms; a hit (no call): p50 "
            f"{pct(hits)[0] * 1000:.0f} us, p99 {pct(hits)[1] * 1000:.0f} us",
            f"  a 10-turn conversation resent whole each turn (110 texts screened, 20 of them new): {calls} calls, "
            f"{hits_n - rounds} verdicts from the cache"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    proc = subprocess.Popen([sys.executable, str(SERVER)], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        url = f"http://127.0.0.1:{int(line.split()[1])}/classify"

        async def run() -> None:
            print("micro-batching (distinct texts, no cache hits):")
            for concurrency in (1, 8, 32):
                for window in (0.001, 2.0, 10.0):
                    print(await bursts(url, concurrency, window, args.rounds))
            print("verdict cache:")
            for out in await cache(url, args.rounds * 5):
                print(out)
        asyncio.run(run())
    finally:
        proc.terminate()
        proc.wait(5)


if __name__ == "__main__":
    main()
