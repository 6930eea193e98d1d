"""Recall, false positives and CPU cost of the built-in PII pattern detector.

    python3 bench/pii_recall.py [--phonenumbers]

Runs ``PatternDetector`` over the planted evaluation set (tests/pii/planted.py) and
prints, per entity type: planted, found (exact value and type), recall; the false
positives on the look-alike texts per type; the spans on planted texts that were not
planted; and the median CPU microseconds per ``find`` call on 2 KB of ordinary English
text with no PII (without digits, and with everyday numbers) and on the planted texts.
CPU time is ``time.process_time_ns`` over batches of calls, so other load on the host
shifts it less than wall time would.

Then the same detector on the outside set (bench/eval_sets/build_pii.py), dev and test
side by side: recall per type, planted values left verbatim by the gateway's masking, false
positives on the look-alikes per family. ``--phonenumbers`` adds the measurement of Google's
libphonenumber (``phonenumbers.PhoneNumberMatcher``, one pass per region of the set)
against the built-in phone shapes: recall on the outside phones and CPU per 2 KB.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from functools import partial

sys.path.insert(0, "src")
sys.path.insert(0, ".")

from bench.eval_sets import pii as outside  # noqa: E402
from tests.pii.planted import LOOKALIKES, PLANTED  # noqa: E402
from tokenward.pii.patterns import ENTITIES, PatternDetector  # noqa: E402

MODEL_TYPES = ("PERSON", "LOCATION")

_PROSE = (
    "Thanks for the quick turnaround on the onboarding review. The team went through the "
    "draft together and agreed that the welcome flow is much clearer than before, although a "
    "few screens still ask for more than they need. We would like to shorten the first step, "
    "move the optional questions to the settings page, and explain why we ask for each item. "
    "Support also noticed that people often get stuck when the confirmation message takes a "
    "while to arrive, so the page should say what happens next and offer a way to resend it. "
    "On the engineering side, the migration finished without surprises and the dashboards look "
    "healthy. Latency went down after the cache change, and the error budget is in good shape "
    "for the rest of the quarter. We still want a second pair of eyes on the retry logic, "
    "because the behaviour under partial outages is hard to reason about from the code alone. "
    "Could someone from the platform group pair with us on that next week? Finally, the "
    "documentation needs a pass before the wider announcement: the examples are out of date, "
    "a couple of links point at the old wiki, and the troubleshooting section should mention "
    "the common mistakes we saw during the pilot. None of this blocks the release, but it "
    "would make the first week much smoother for everyone involved. "
)
_NUMBERS = (
    ("the draft together", "the draft together on 12 May 2024"),
    ("a few screens", "3 of the 14 screens"),
    ("went down after", "went down by 40% (from 250 ms to 150 ms) after"),
    ("the rest of the quarter", "the rest of Q3, about 2.5 days left"),
    ("next week?", "next week, say Tuesday at 10:30?"),
    ("a couple of links", "7 links"),
    ("during the pilot", "during the 6-week pilot with 120 users"),
)


def prose_2kb(with_numbers: bool) -> str:
    """2048 characters of PII-free English prose, optionally with everyday numbers in it."""
    text = _PROSE
    if with_numbers:
        for old, new in _NUMBERS:
            text = text.replace(old, new)
    while len(text) < 2048:
        text += text
    return text[:2048]


def cpu_us_per_call(fn: Callable[[], object], batch: int = 200, rounds: int = 31) -> float:
    """Median CPU microseconds per call over ``rounds`` batches of ``batch`` calls."""
    samples = []
    for _ in range(rounds):
        t0 = time.process_time_ns()
        for _ in range(batch):
            fn()
        samples.append((time.process_time_ns() - t0) / batch / 1000)
    return statistics.median(samples)


def main() -> None:
    detector = PatternDetector()
    planted: Counter[str] = Counter()
    found: Counter[str] = Counter()
    extra: list[tuple[str, str]] = []
    for text, entities in PLANTED:
        spans = {(text[s:e], kind) for s, e, kind in detector.find(text)}
        expected = {(value, kind) for kind, value in entities}
        for kind, value in entities:
            planted[kind] += 1
            if (value, kind) in spans:
                found[kind] += 1
        extra.extend(sorted(spans - expected))

    false_pos: Counter[str] = Counter()
    fp_examples: list[tuple[str, str]] = []
    for text in LOOKALIKES:
        for s, e, kind in detector.find(text):
            false_pos[kind] += 1
            fp_examples.append((kind, text[s:e]))

    print(f"planted set: {len(PLANTED)} texts, {sum(planted.values())} entities; look-alikes: {len(LOOKALIKES)} texts\n")
    print(f"{'entity':<16}{'planted':>8}{'found':>7}{'recall':>9}{'FP on look-alikes':>19}")
    total_p = total_f = 0
    for kind in ENTITIES + MODEL_TYPES:
        p, f = planted[kind], found[kind]
        note = "" if kind in ENTITIES else "  (not built in: Presidio extra)"
        recall = f"{100 * f / p:.0f}%" if p else "-"
        print(f"{kind:<16}{p:>8}{f:>7}{recall:>9}{false_pos[kind]:>19}{note}")
        if kind in ENTITIES:
            total_p, total_f = total_p + p, total_f + f
    print(f"{'built-in total':<16}{total_p:>8}{total_f:>7}{100 * total_f / total_p:>8.0f}%{sum(false_pos.values()):>19}")
    print(f"\nspans on planted texts that were not planted: {len(extra)} {extra if extra else ''}")
    if fp_examples:
        print(f"false positives: {fp_examples}")

    plain, numbered = prose_2kb(False), prose_2kb(True)
    assert not detector.find(plain) and not detector.find(numbered), "the timing texts must hold no PII"
    texts = [text for text, _ in PLANTED]
    mean_len = sum(map(len, texts)) / len(texts)
    t_plain = cpu_us_per_call(lambda: detector.find(plain))
    t_numbered = cpu_us_per_call(lambda: detector.find(numbered))
    per_text = [cpu_us_per_call(partial(detector.find, t), batch=100, rounds=11) for t in texts]
    print("\nCPU per find() call (median of batches, time.process_time_ns):")
    print(f"  2 KB English prose, no PII, no digits        {t_plain:8.1f} us")
    print(f"  2 KB English prose, no PII, everyday numbers {t_numbered:8.1f} us")
    print(
        f"  planted texts (mean {mean_len:.0f} chars)             {statistics.median(per_text):8.1f} us median,"
        f" {max(per_text):.1f} us max"
    )


def outside_tables(detector: PatternDetector) -> None:
    scores = {split: outside.score(detector.find, outside.load(split)) for split in ("dev", "test")}
    print("\noutside set (bench/eval_sets/pii_*.jsonl): found / planted, recall")
    print(f"{'entity':<16}{'dev':>16}{'test':>16}")
    for kind in outside.TYPES:
        cells = []
        for split in ("dev", "test"):
            sc = scores[split]
            p, f = sc.planted[kind], sc.found[kind]
            cells.append(f"{f}/{p} {100 * f / p:.0f}%" if p else "-")
        print(f"{kind:<16}{cells[0]:>16}{cells[1]:>16}")
    for split, sc in scores.items():
        total = sum(sc.planted.values())
        print(f"{split}: {sum(sc.reached.values())}/{total} planted values reach the backend "
              f"({100 * sc.reached_share():.1f}%; PERSON is not built in); false positives on "
              f"{sc.lookalikes} look-alikes: {sum(sc.false_pos.values())} {sc.fp_examples}")
        print(f"  missed (not PERSON): {[m for m in sc.misses if m[0] != 'PERSON']}")


def phonenumbers_compare(detector: PatternDetector) -> None:
    import phonenumbers

    from bench.eval_sets.build_pii import EXAMPLE_REGIONS

    regions = EXAMPLE_REGIONS + ("IT", "ES")

    def matcher(text: str) -> list[tuple[int, int, str]]:
        spans = set()
        for region in regions:
            for m in phonenumbers.PhoneNumberMatcher(text, region):
                spans.add((m.start, m.end, "PHONE"))
        return sorted(spans)

    rows = outside.load("test")
    for label, find in (("built-in shapes", detector.find), (f"PhoneNumberMatcher x{len(regions)} regions", matcher)):
        sc = outside.score(find, rows, ("PHONE",))
        fps = sum(sc.false_pos.values())
        t = cpu_us_per_call(lambda: find(prose_2kb(True)), batch=5 if find is matcher else 200, rounds=7)
        print(f"  {label:<34} phones {sc.found['PHONE']}/{sc.planted['PHONE']}, "
              f"{fps} spans on look-alikes, {t:9.1f} us CPU per 2 KB prose with numbers")


if __name__ == "__main__":
    main()
    outside_tables(PatternDetector())
    if "--phonenumbers" in sys.argv:
        print("\nphone numbers, outside test split:")
        phonenumbers_compare(PatternDetector())
