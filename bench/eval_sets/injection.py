"""The outside injection set (build_injection.py builds it): rows of one split.

Each row: ``id``, ``label`` (1 attack, 0 benign), ``family`` (override, persona,
exfiltration, indirect, encoded, markup, tool_abuse; ``benign``), ``lang``, ``channel``
(user, document, tool), ``risky`` (a benign prompt that looks like an attack),
``source``, ``source_id``, ``text``. ``dev``: tune on it; ``test``: report on it only.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
SPLITS = ("dev", "test", "heldout")   # heldout: the sources nothing is tuned on


def load(split: str) -> list[dict]:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r} (dev, test or heldout)")
    with open(HERE / f"injection_{split}.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f]
