"""The semantic cache's matcher on outside question pairs, per source (bench/eval_sets/pairs.py).

    python3 bench/cache_pairs_eval.py [--thresholds 0.8,0.85,0.9] [--misses SOURCE]

For each source and threshold: the share of trap pairs and of non-paraphrases that would
be served the other question's answer, and the share of paraphrases and near-repeats that
would be served (reach), by the embedding alone, with the old guard terms, and with the
matcher the cache runs (similarity + cache/question_diff.py's signature). ``fow-cache`` is
held out: its figures are read, never tuned on; ``--misses`` prints pairs only for the
sources tuned on.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from bench.eval_sets.pairs import HELD_OUT, load  # noqa: E402
from tokenward.cache.question_diff import signature  # noqa: E402
from tokenward.cache.semantic import guard_terms  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--thresholds", default="0.7,0.8,0.85,0.9,0.95")
    parser.add_argument("--misses", help="print the pairs a source tuned on gets wrong at the first threshold")
    args = parser.parse_args()
    if args.misses in HELD_OUT:
        sys.exit(f"{args.misses} is held out: its pairs are not printed")
    from tokenward.screening.classifier import load_encoder

    pairs = load()
    encoder = load_encoder()
    a = encoder.embed([p["a"] for p in pairs])
    b = encoder.embed([p["b"] for p in pairs])
    sims = (a * b).sum(1)
    thresholds = [float(t) for t in args.thresholds.split(",")]
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, p in enumerate(pairs):
        kind = "served" if p["kind"] in ("paraphrase", "near_repeat") else p["kind"]
        groups[(p["source"], kind)].append(i)
        groups[(p["source"], p["kind"])].append(i) if kind == "served" else None
    same_sig = [signature(p["a"]) == signature(p["b"]) for p in pairs]
    same_guard = [guard_terms(p["a"]) == guard_terms(p["b"]) for p in pairs]
    print(f"{'source':<10} {'pairs':<15} {'n':>4}  " + "  ".join(f"@{t:<4} emb/guard/match" for t in thresholds))
    for (source, kind), idx in sorted(groups.items()):
        cells = []
        for t in thresholds:
            emb = sum(sims[i] >= t for i in idx) / len(idx)
            old = sum(sims[i] >= t and same_guard[i] for i in idx) / len(idx)
            new = sum(sims[i] >= t and same_sig[i] for i in idx) / len(idx)
            cells.append(f"{emb:6.1%}/{old:6.1%}/{new:6.1%}")
        mark = " (held out)" if source in HELD_OUT else ""
        print(f"{source:<10} {kind:<15} {len(idx):>4}  " + "  ".join(cells) + mark)
    if args.misses:
        t = thresholds[0]
        for i, p in enumerate(pairs):
            if p["source"] != args.misses:
                continue
            hit = sims[i] >= t and same_sig[i]
            good = p["kind"] in ("paraphrase", "near_repeat")
            if hit != good:
                print(f"{'MISSED' if good else 'WRONG '} {sims[i]:.2f} {p['a']!r} || {p['b']!r}")
                if good:
                    print("      ", sorted(set(signature(p['a'])) ^ set(signature(p['b']))))


if __name__ == "__main__":
    main()
