"""Heuristic + classifier combined (screening/combined.py), calibrated on the outside dev split.

    python3 bench/screening_combined.py [--risky-fpr 0.05] [--cache /tmp/tokenward-combined.json]

Scores every prompt of the outside set (bench/eval_sets) with the heuristic and with the
classifier (calibrated scores, the policy's scale), then, **on dev only**, picks for each
configuration the policy threshold (``restrict_at``) and, for ``combine: weighted``, the
weights, that give the highest recall with at most ``--risky-fpr`` of the risky-looking
benign prompts flagged (ties: the higher threshold). Configurations: each detector alone,
``combine: max``, ``combine: weighted`` (heuristic weight 1, classifier weight w). Then the
test split is scored once with what dev chose: recall, risky-looking benign flagged, all
benign flagged. Nothing is chosen on test.

The scores are what the gateway computes (HeuristicInjection.score, ClassifierInjection's
calibrated probability, the max or weighted mean of combined.Combined), so a configuration
here is a policy: ``injection: {detectors: [heuristic, classifier], combine: weighted,
weights: {heuristic: 1, classifier: w}, restrict_at: t}``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

import argparse  # noqa: E402
import json  # noqa: E402

from bench.eval_sets.injection import load  # noqa: E402

GRID = [round(0.30 + 0.01 * i, 2) for i in range(70)]          # restrict_at candidates, 0.30 .. 0.99
WEIGHTS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0, 1.5, 2.0, 3.0]   # the classifier's weight (heuristic: 1)


def scores(cache: Path) -> dict[str, dict[str, list[float]]]:
    """{split: {"heuristic": [...], "classifier": [...]}} (cached: the classifier takes minutes)."""
    if cache.exists():
        return json.loads(cache.read_text())
    from tokenward.screening.classifier import ClassifierInjection
    from tokenward.screening.injection import HeuristicInjection

    heuristic, classifier = HeuristicInjection(), ClassifierInjection()
    out = {}
    for split in ("dev", "test"):
        texts = [r["text"] for r in load(split)]
        out[split] = {"heuristic": [heuristic.score([t])[0] for t in texts],
                      "classifier": [classifier.head.calibrated(p) for p in classifier.probabilities(texts)]}
    classifier.close()
    cache.write_text(json.dumps(out))
    return out


def rates(combined: list[float], rows: list[dict], t: float) -> tuple[int, int, int, int, int, int]:
    """(attacks caught, attacks, risky flagged, risky, benign flagged, benign) at threshold t."""
    flag = [s >= t for s in combined]
    return (sum(f for f, r in zip(flag, rows) if r["label"]), sum(r["label"] for r in rows),
            sum(f for f, r in zip(flag, rows) if r["risky"]), sum(r["risky"] for r in rows),
            sum(f for f, r in zip(flag, rows) if not r["label"]), sum(1 - r["label"] for r in rows))


def combine(kind: str, h: list[float], c: list[float], w: float) -> list[float]:
    if kind == "heuristic":
        return h
    if kind == "classifier":
        return c
    if kind == "max":
        return [max(a, b) for a, b in zip(h, c)]
    return [(a + w * b) / (1 + w) for a, b in zip(h, c)]


def calibrate(kind: str, s: dict[str, list[float]], rows: list[dict], risky_fpr: float) -> tuple[float, float, tuple]:
    """(w, t, dev rates) with the best dev recall at risky-FP <= risky_fpr; ties: higher t."""
    best = None
    for w in (WEIGHTS if kind == "weighted" else [0.0]):
        combined = combine(kind, s["heuristic"], s["classifier"], w)
        for t in GRID:
            r = rates(combined, rows, t)
            if r[2] > risky_fpr * r[3]:
                continue
            key = (r[0], -r[4], t)
            if best is None or key > best[0]:
                best = (key, w, t, r)
    assert best is not None
    return best[1], best[2], best[3]


def fmt(r: tuple) -> str:
    return (f"recall {r[0]}/{r[1]} ({r[0] / r[1]:.3f}), risky-looking benign flagged {r[2]}/{r[3]} "
            f"({r[2] / r[3]:.1%}), benign flagged {r[4]}/{r[5]} ({r[4] / r[5]:.1%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--risky-fpr", type=float, nargs="+", default=[0.05, 0.0])
    parser.add_argument("--cache", default="/tmp/tokenward-combined-scores.json")
    args = parser.parse_args()
    s = scores(Path(args.cache))
    dev, test = load("dev"), load("test")
    print("fixed thresholds (the policy's defaults), dev / test:")
    for kind in ("heuristic", "classifier", "max"):
        for t in (0.6, 0.9):
            print(f"  {kind:<10} restrict_at {t}: dev {fmt(rates(combine(kind, s['dev']['heuristic'], s['dev']['classifier'], 0), dev, t))}")
            print(f"  {'':<10} {'':<15} test {fmt(rates(combine(kind, s['test']['heuristic'], s['test']['classifier'], 0), test, t))}")
    for fpr in args.risky_fpr:
        print(f"\ncalibrated on dev to at most {fpr:.0%} of risky-looking benign flagged; test scored once:")
        for kind in ("heuristic", "classifier", "max", "weighted"):
            w, t, r = calibrate(kind, s["dev"], dev, fpr)
            rt = rates(combine(kind, s["test"]["heuristic"], s["test"]["classifier"], w), test, t)
            label = f"{kind} (classifier weight {w})" if kind == "weighted" else kind
            print(f"  {label:<32} restrict_at {t:.2f}\n    dev  {fmt(r)}\n    test {fmt(rt)}")


if __name__ == "__main__":
    main()
