"""The semantic cache's false-hit rate and reach on a written set of question pairs.

    python bench/semantic_eval.py [--pairs bench/semantic_pairs.json]

For each threshold: the share of paraphrase pairs that would be served one answer (reach)
and the share of near-miss pairs that would wrongly be (false hits), by embedding
similarity alone and with the guard terms (src/tokenward/cache/semantic.py); then the
embedding's p50/p99 latency for one question. docs/cache.md records the output.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

from tokenward.cache.semantic import guard_terms  # noqa: E402
from tokenward.screening.classifier import load_encoder  # noqa: E402

THRESHOLDS = (0.8, 0.85, 0.88, 0.9, 0.92, 0.95)


def rates(encoder, pairs: list[list[str]]) -> dict[float, tuple[float, float]]:
    a = encoder.embed([p[0] for p in pairs])
    b = encoder.embed([p[1] for p in pairs])
    sims = (a * b).sum(1)
    same = np.array([guard_terms(x) == guard_terms(y) for x, y in pairs])
    return {t: (float(np.mean(sims >= t)), float(np.mean((sims >= t) & same))) for t in THRESHOLDS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", default=str(HERE / "semantic_pairs.json"))
    args = parser.parse_args()
    data = json.loads(Path(args.pairs).read_text())
    encoder = load_encoder()
    para, near = rates(encoder, data["paraphrases"]), rates(encoder, data["near_misses"])
    print(f"{len(data['paraphrases'])} paraphrase pairs, {len(data['near_misses'])} near-miss pairs; "
          f"encoder {type(encoder).__name__}")
    print("threshold  reach (embedding)  reach (+guard)  false hits (embedding)  false hits (+guard)")
    for t in THRESHOLDS:
        print(f"{t:9.2f}  {para[t][0]:17.1%}  {para[t][1]:14.1%}  {near[t][0]:22.1%}  {near[t][1]:19.1%}")
    questions = [p[0] for p in data["paraphrases"]] * 5
    took = []
    for q in questions:
        started = time.perf_counter()
        encoder.embed([q])
        took.append((time.perf_counter() - started) * 1000)
    print(f"one question's embedding: p50 {np.percentile(took, 50):.2f} ms, p99 {np.percentile(took, 99):.2f} ms")


if __name__ == "__main__":
    main()
