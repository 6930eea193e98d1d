"""Recall, false positives and CPU cost of the optional Presidio PII detector.

    python3 bench/pii_recall_presidio.py [--min-score 0.7] [--rounds 20] [--load]

Needs the presidio extra (docs/pii-presidio.md). Runs ``PresidioDetector`` (built-in
patterns merged with Presidio + spaCy en_core_web_sm) over the planted evaluation set
(tests/pii/planted.py) and prints, per entity type: planted, found (exact value and
type), recall, the same for Presidio alone (``builtin=False``) and for the built-in
detector alone; the false positives on the look-alike texts per type; the spans on
planted texts that were not planted. Then the cold start (import + model load) and the
CPU time per ``find`` call, p50 and p99 over single calls (``time.process_time_ns``), on
the planted texts and on 2 KB prompts, beside the built-in detector's.

Then the outside set (bench/eval_sets/build_pii.py), dev and test side by side: recall per
type for Presidio with the built-in patterns and the name cues (what ``detector: presidio``
runs), without the cues, and the built-in patterns alone; the planted values that reach the
backend (left verbatim by the gateway's ``Masker``); false positives on the look-alikes.
``--load`` adds the wall latency through the gateway's screener (the thread it runs in,
``screening.run``) under Poisson arrivals of outside texts and 2 KB prompts, and how many
requests each budget (25, 100, 250 ms) would have failed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence

sys.path.insert(0, "src")
sys.path.insert(0, ".")

from tests.pii.planted import LOOKALIKES, PLANTED  # noqa: E402
from tokenward.pii.patterns import PatternDetector  # noqa: E402

Find = Callable[[str], list[tuple[int, int, str]]]

_PROSE = (
    "Thanks for the quick turnaround on the onboarding review. The team went through the draft "
    "on 12 May 2024 and agreed that the welcome flow is much clearer than before, although 3 of "
    "the 14 screens still ask for more than they need. We would like to shorten the first step, "
    "move the optional questions to the settings page, and explain why we ask for each item. "
    "Latency went down by 40% (from 250 ms to 150 ms) after the cache change, and the error "
    "budget is in good shape for the rest of Q3. Could someone from the platform group pair with "
    "us on the retry logic next week, say Tuesday at 10:30? The documentation needs a pass before "
    "the wider announcement: 7 links point at the old wiki. "
)


def prompt_2kb(pii: bool) -> str:
    """2048 characters: everyday prose with numbers, or the planted texts (PII-dense)."""
    text = " ".join(t for t, _ in PLANTED) if pii else _PROSE
    while len(text) < 2048:
        text += " " + text
    return text[:2048]


def recall(find: Find) -> tuple[Counter[str], Counter[str], list[tuple[str, str]]]:
    """(planted per type, found per type, unplanted spans) over PLANTED."""
    planted: Counter[str] = Counter()
    found: Counter[str] = Counter()
    extra: list[tuple[str, str]] = []
    for text, entities in PLANTED:
        spans = {(text[s:e], kind) for s, e, kind in find(text)}
        for kind, value in entities:
            planted[kind] += 1
            found[kind] += (value, kind) in spans
        extra.extend(sorted(spans - {(value, kind) for kind, value in entities}))
    return planted, found, extra


def false_positives(find: Find) -> list[tuple[str, str]]:
    return [(kind, text[s:e]) for text in LOOKALIKES for s, e, kind in find(text)]


def per_call_us(find: Find, texts: Sequence[str], rounds: int) -> tuple[float, float]:
    """(p50, p99) CPU microseconds of single ``find`` calls, each text ``rounds`` times."""
    for text in texts:  # warm
        find(text)
    samples = []
    for _ in range(rounds):
        for text in texts:
            t0 = time.process_time_ns()
            find(text)
            samples.append((time.process_time_ns() - t0) / 1000)
    cuts = statistics.quantiles(samples, n=100)
    return statistics.median(samples), cuts[98]


def _pct(found: int, planted: int) -> str:
    return f"{100 * found / planted:.0f}%" if planted else "-"


def print_tables(ours: Find, alone: Find, builtin: Find, kinds: Sequence[str]) -> None:
    p, f, extra = recall(ours)
    _, fa, _ = recall(alone)
    _, fb, _ = recall(builtin)
    fps = false_positives(ours)
    fp_kind = Counter(kind for kind, _ in fps)
    fp_alone = Counter(kind for kind, _ in false_positives(alone))
    print(f"planted set: {len(PLANTED)} texts, {sum(p.values())} entities; look-alikes: {len(LOOKALIKES)} texts\n")
    head = f"{'entity':<16}{'planted':>8}{'found':>7}{'recall':>8}{'FP':>5}   {'presidio alone':>15}{'FP':>5}   {'built-in':>9}"
    print(head)
    for kind in kinds:
        print(
            f"{kind:<16}{p[kind]:>8}{f[kind]:>7}{_pct(f[kind], p[kind]):>8}{fp_kind[kind]:>5}   "
            f"{_pct(fa[kind], p[kind]):>15}{fp_alone[kind]:>5}   {_pct(fb[kind], p[kind]):>9}"
        )
    tp, tf = sum(p.values()), sum(f.values())
    print(
        f"{'total':<16}{tp:>8}{tf:>7}{_pct(tf, tp):>8}{sum(fp_kind.values()):>5}   "
        f"{_pct(sum(fa.values()), tp):>15}{sum(fp_alone.values()):>5}   {_pct(sum(fb.values()), tp):>9}"
    )
    print(f"\nfalse positives on look-alikes ({len(fps)}): {fps}")
    print(f"spans on planted texts that were not planted ({len(extra)}): {extra}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--min-score", type=float, default=None)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--load", action="store_true", help="latency under Poisson arrivals (after the tables)")
    args = parser.parse_args()

    t0 = time.perf_counter()
    from tokenward.pii.presidio import ENTITIES, MIN_SCORE, PresidioDetector

    min_score = MIN_SCORE if args.min_score is None else args.min_score
    detector = PresidioDetector(min_score=min_score)
    cold = time.perf_counter() - t0
    alone = PresidioDetector(min_score=min_score, builtin=False)
    builtin = PatternDetector()
    print(f"PresidioDetector, min_score={min_score}; cold start (import + spaCy model + analyzer): {cold:.1f} s wall\n")
    print_tables(detector.find, alone.find, builtin.find, ENTITIES)

    planted = [t for t, _ in PLANTED]
    mean_len = sum(map(len, planted)) / len(planted)
    cases = [
        (f"planted texts (mean {mean_len:.0f} chars)", planted),
        ("2 KB prose with everyday numbers, no PII", [prompt_2kb(False)]),
        ("2 KB of planted texts (PII-dense)", [prompt_2kb(True)]),
    ]
    print(f"\nCPU per find() call, p50 / p99 over single calls ({args.rounds} rounds), time.process_time_ns:")
    for label, texts in cases:
        rounds = args.rounds if len(texts) > 1 else args.rounds * 10
        p50, p99 = per_call_us(detector.find, texts, rounds)
        b50, b99 = per_call_us(builtin.find, texts, rounds)
        print(f"  {label:<44} presidio {p50 / 1000:7.2f} / {p99 / 1000:7.2f} ms   built-in {b50:7.1f} / {b99:7.1f} us")


def outside_tables(variants: dict[str, Find]) -> None:
    from bench.eval_sets import pii as outside

    rows = {split: outside.load(split) for split in ("dev", "test")}
    scores = {(name, split): outside.score(find, rows[split]) for name, find in variants.items() for split in rows}
    print("\noutside set (bench/eval_sets/pii_*.jsonl): recall, dev / test")
    print(f"{'entity':<16}" + "".join(f"{name:>26}" for name in variants))
    for kind in outside.TYPES:
        cells = []
        for name in variants:
            pair = []
            for split in ("dev", "test"):
                sc = scores[(name, split)]
                pair.append(f"{sc.found[kind]}/{sc.planted[kind]}" if sc.planted[kind] else "-")
            cells.append(" / ".join(pair))
        print(f"{kind:<16}" + "".join(f"{c:>26}" for c in cells))
    for name in variants:
        for split in ("dev", "test"):
            sc = scores[(name, split)]
            print(f"{name} {split}: {sum(sc.reached.values())}/{sum(sc.planted.values())} planted values reach the "
                  f"backend ({100 * sc.reached_share():.1f}%) {dict(sc.reached)}; false positives on "
                  f"{sc.lookalikes} look-alikes: {sc.fp_examples}")


def load_latency(rate: float, n: int, big_share: float, seed: int = 1) -> None:
    """Wall ms through the gateway's Presidio screener under Poisson arrivals."""
    import asyncio
    import random

    from bench.eval_sets import pii as outside
    from tokenward.screening import screener as screening
    from tokenward.screening.detectors import pii_screener

    texts = [r["text"] for r in outside.load("test")]
    big = " ".join(texts)[:2048]

    async def run() -> list[float]:
        scr = pii_screener("presidio", None)
        await screening.run(scr, [texts[0]], 5)
        rng, lat = random.Random(seed), []

        async def one(batch: list[str]) -> None:
            t0 = time.perf_counter()
            await screening.run(scr, batch, 10)
            lat.append((time.perf_counter() - t0) * 1000)

        tasks = []
        for _ in range(n):
            await asyncio.sleep(rng.expovariate(rate))
            tasks.append(asyncio.create_task(one([big] if rng.random() < big_share else [rng.choice(texts)])))
        await asyncio.gather(*tasks)
        return lat

    lat = asyncio.run(run())
    q = statistics.quantiles(lat, n=100)
    over = {b: 100 * sum(x > b for x in lat) / len(lat) for b in (25, 100, 250)}
    print(f"  {rate:4.0f}/s, {100 * big_share:3.0f}% 2 KB, {n} requests: p50 {q[49]:6.1f}  p99 {q[98]:6.1f}  "
          f"max {max(lat):6.1f} ms; over 25 ms {over[25]:4.1f}%, 100 ms {over[100]:3.1f}%, 250 ms {over[250]:3.1f}%")


if __name__ == "__main__":
    main()
    from tokenward.pii.presidio import PresidioDetector as _P

    outside_tables({"presidio (shipped)": _P().find, "presidio, no name cues": _P(names=False).find,
                    "built-in alone": PatternDetector().find})
    if "--load" in sys.argv:
        import os

        print(f"\nwall latency through the screener (load average {os.getloadavg()[0]:.1f}):")
        for rate, share in ((5, 0.0), (20, 0.0), (5, 0.1), (10, 0.1)):
            load_latency(rate, 300, share)
