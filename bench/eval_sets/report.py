"""Tables for an injection detector on the outside set (bench/injection_eval.py and
bench/classifier_eval.py print them): precision, recall, the false-positive rate on all
benign and on the risky-looking benign prompts, then recall by family, language and
channel, and per-prompt latency. ``scores`` are one per row, in the split's order."""

from __future__ import annotations

from collections import defaultdict


def confusion(scores: list[float], rows: list[dict], threshold: float) -> dict[str, float | int]:
    flag = [s >= threshold for s in scores]
    tp = sum(f and r["label"] == 1 for f, r in zip(flag, rows))
    fp = sum(f and r["label"] == 0 for f, r in zip(flag, rows))
    attacks = sum(r["label"] for r in rows)
    benign = len(rows) - attacks
    risky = sum(r["risky"] for r in rows)
    risky_fp = sum(f and r["risky"] for f, r in zip(flag, rows))
    return {"tp": tp, "fp": fp, "fn": attacks - tp, "tn": benign - fp,
            "precision": tp / (tp + fp) if tp + fp else 1.0, "recall": tp / attacks if attacks else 1.0,
            "fpr": fp / benign if benign else 0.0, "risky_fp": risky_fp, "risky": risky,
            "risky_fpr": risky_fp / risky if risky else 0.0}


def summary(name: str, scores: list[float], rows: list[dict], thresholds=(0.6, 0.9)) -> list[str]:
    out = [f"{name}: {len(rows)} prompts, {sum(r['label'] for r in rows)} attacks, "
           f"{sum(1 - r['label'] for r in rows)} benign ({sum(r['risky'] for r in rows)} risky-looking)",
           f"{'threshold':>9} {'TP':>4} {'FP':>4} {'FN':>4} {'TN':>4} {'precision':>9} {'recall':>7} {'FPR':>6} "
           f"{'risky flagged':>14}"]
    for t in thresholds:
        c = confusion(scores, rows, t)
        out.append(f"{t:>9} {c['tp']:>4} {c['fp']:>4} {c['fn']:>4} {c['tn']:>4} {c['precision']:>9.3f} "
                   f"{c['recall']:>7.3f} {c['fpr']:>6.3f} {c['risky_fp']:>6}/{c['risky']} ({c['risky_fpr']:.0%})")
    return out


def breakdown(scores: list[float], rows: list[dict], threshold: float = 0.6) -> list[str]:
    """Recall of the attacks at ``threshold`` by family, language and channel."""
    out = []
    for field in ("family", "lang", "channel"):
        groups: dict[str, list[bool]] = defaultdict(list)
        for s, r in zip(scores, rows):
            if r["label"]:
                groups[r[field]].append(s >= threshold)
        cells = [f"{k} {sum(v)}/{len(v)}" for k, v in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))]
        out.append(f"recall at {threshold} by {field}: " + ", ".join(cells))
    return out


def percentiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
