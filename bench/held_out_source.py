"""Leave-one-source-out figures for the injection detectors (bench/injection_eval.py
--held-out-source prints them; docs/injection-eval.md reports them).

Sources come in two kinds (bench/eval_sets/SOURCES.md):

- the **pool**: the eight sources of the dev/test files. For each of them in turn, every
  free choice (the policy threshold ``restrict_at``; for ``combine: weighted`` also the
  classifier's weight) is made on the *other* pool sources, and the held-out one is scored
  with that choice: what a user whose traffic looks like no source seen gets;
- the **held-out-only** sources (``injection_heldout.jsonl``: agentdojo, bastionprobe, pyrit,
  botocore): never read to write a rule, never part of any choice; scored with the choice
  made on the whole pool.

A choice keeps at most ``risky_fpr`` of the risky-looking benign prompts (and ``benign_fpr``
of all benign prompts) flagged on the rows it is made on and, among those, takes the
*highest* threshold whose recall is within ``MARGIN`` (2 points) of the best: the pool's
benign rows are few and clean, so the bars alone pick the lowest threshold on the grid,
and a threshold that low let single weak signals flag benign tool outputs of a source never
seen (the first run: agentdojo, 16 of 153 at 0.32; docs/injection-eval.md). Scores are cached by text hash (the classifier takes minutes on CPU).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Callable, Sequence

GRID = [round(0.30 + 0.01 * i, 2) for i in range(70)]
MARGIN = 0.02
WEIGHTS = [0.2, 0.4, 0.6, 0.8, 1.0, 1.5, 2.0]
CACHE = Path("/tmp/tokenward-held-out-scores.json")


def rows_by_source() -> tuple[dict[str, list[dict]], dict[str, list[dict]]]:
    from bench.eval_sets.injection import load

    pool: dict[str, list[dict]] = {}
    for r in load("dev") + load("test"):
        pool.setdefault(r["source"], []).append(r)
    held: dict[str, list[dict]] = {}
    for r in load("heldout"):
        held.setdefault(r["source"], []).append(r)
    return pool, held


def code_version(*modules: str) -> str:
    """A digest of the screening modules' source: a cached score is reused only for the same code."""
    here = Path(__file__).resolve().parents[1] / "src" / "tokenward" / "screening"
    names = {"injection": ["injection.py", "injection_patterns.py", "injection_vocab.py", "injection_documents.py",
                           "encoded.py", "folding.py"], "tool_output": ["tool_output.py"]}
    digest = hashlib.sha256()
    for module in modules:
        for name in names[module]:
            path = here / name
            if path.exists():
                digest.update(path.read_bytes())
    return digest.hexdigest()[:10]


def scored(rows: list[dict], detectors: dict[str, Callable[[list[str]], list[float]]]) -> None:
    """Adds ``r["s"][name]`` for every detector, from the cache where it can."""
    cache = json.loads(CACHE.read_text()) if CACHE.exists() else {}
    for name, score in detectors.items():
        todo = [r for r in rows if f"{name}:{_key(r)}" not in cache]
        if todo:
            for r, s in zip(todo, score([r["text"] for r in todo])):
                cache[f"{name}:{_key(r)}"] = s
        for r in rows:
            r.setdefault("s", {})[name] = cache[f"{name}:{_key(r)}"]
    CACHE.write_text(json.dumps(cache))


def _key(r: dict) -> str:
    return hashlib.sha256(r["text"].encode()).hexdigest()[:20] + r.get("channel", "")


def rates(rows: Sequence[dict], score: Callable[[dict], float], t: float) -> dict[str, int]:
    flag = [score(r) >= t for r in rows]
    return {"tp": sum(f and r["label"] == 1 for f, r in zip(flag, rows)), "attacks": sum(r["label"] for r in rows),
            "risky_fp": sum(f and r["risky"] for f, r in zip(flag, rows)), "risky": sum(r["risky"] for r in rows),
            "fp": sum(f and not r["label"] for f, r in zip(flag, rows)), "benign": sum(1 - r["label"] for r in rows)}


def choose(rows: Sequence[dict], config: dict, risky_fpr: float, benign_fpr: float) -> tuple[float, float]:
    """(weight, restrict_at) with the best recall within the bars on ``rows``."""
    feasible = []
    for w in (WEIGHTS if config["weighted"] else [0.0]):
        fn = combined(config, w)
        for t in GRID:
            c = rates(rows, fn, t)
            if c["risky_fp"] > risky_fpr * max(c["risky"], 1) or c["fp"] > benign_fpr * max(c["benign"], 1):
                continue
            feasible.append((c["tp"] / max(c["attacks"], 1), t, w))
    if not feasible:
        return 0.0, 1.0
    best = max(f[0] for f in feasible)
    t, _, w = max((t, -abs(w - 1), w) for r, t, w in feasible if r >= best - MARGIN)
    return w, t


def combined(config: dict, w: float) -> Callable[[dict], float]:
    names = config["detectors"]
    if config["weighted"]:
        return lambda r: (r["s"][names[0]] + w * r["s"][names[1]]) / (1 + w)
    return lambda r: max(r["s"][n] for n in names)


def fixed(config: dict, w: float, t: float) -> Callable[[Sequence[dict]], dict[str, int]]:
    fn = combined(config, w)
    return lambda rows: rates(rows, fn, t)


def leave_one_out(pool: dict[str, list[dict]], held: dict[str, list[dict]], config: dict, risky_fpr: float,
                  benign_fpr: float) -> list[tuple[str, str, float, float, dict[str, int]]]:
    """Per source: (source, kind, weight, restrict_at, rates)."""
    out = []
    for source, rows in sorted(pool.items()):
        rest = [r for s, rs in pool.items() if s != source for r in rs]
        w, t = choose(rest, config, risky_fpr, benign_fpr)
        out.append((source, "pool", w, t, fixed(config, w, t)(rows)))
    w, t = choose([r for rs in pool.values() for r in rs], config, risky_fpr, benign_fpr)
    for source, rows in sorted(held.items()):
        out.append((source, "held-out only", w, t, fixed(config, w, t)(rows)))
    return out


def summary(results: list[tuple[str, str, float, float, dict[str, int]]]) -> dict[str, float]:
    recalls = [c["tp"] / c["attacks"] for _, _, _, _, c in results if c["attacks"]]
    risky = sum(c["risky_fp"] for *_, c in results), sum(c["risky"] for *_, c in results)
    benign = sum(c["fp"] for *_, c in results), sum(c["benign"] for *_, c in results)
    return {"worst": min(recalls), "mean": sum(recalls) / len(recalls), "risky_fp": risky[0], "risky": risky[1],
            "fp": benign[0], "benign": benign[1]}
