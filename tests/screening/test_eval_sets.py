"""The outside injection set as committed: well formed, dev and test disjoint, apart from the own set."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.eval_sets.injection import load  # noqa: E402
from tests.screening.injection_eval import EVAL  # noqa: E402


def _key(text: str) -> str:
    return " ".join(text.casefold().split())


def test_rows_are_well_formed_and_splits_disjoint():
    dev, test = load("dev"), load("test")
    assert len(dev) > 150 and len(test) > 250
    for row in dev + test:
        assert row["label"] in (0, 1) and row["text"].strip()
        assert row["family"] == "benign" if not row["label"] else row["family"] != "benign"
        assert not (row["risky"] and row["label"])
    assert not {_key(r["text"]) for r in dev} & {_key(r["text"]) for r in test}
    assert len({r["id"] for r in dev + test}) == len(dev) + len(test)
    assert sum(r["risky"] for r in test) >= 40       # enough look-alikes to measure a false-positive rate


def test_apart_from_the_own_set_and_sources_recorded():
    own = {_key(p) for p, _ in EVAL}
    rows = load("dev") + load("test")
    assert not own & {_key(r["text"]) for r in rows}
    sources = json.loads((ROOT / "bench/eval_sets/sources.json").read_text())
    assert {r["source"] for r in rows} <= set(sources)
    for name, info in sources.items():
        if not name.startswith("_"):
            assert info["licence"] in ("MIT", "Apache-2.0")
            assert (ROOT / "bench/eval_sets" / info["licence_file"]).read_text().strip()
