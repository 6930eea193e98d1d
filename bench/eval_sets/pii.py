"""The outside personal-data set (``build_pii.py``): loading and scoring.

A planted value counts as **found** when a span of its type covers it whole (a span may
be wider: ``742 Evergreen Terrace, Springfield, IL 62704`` covers the street line). It
**reaches the backend** when it still appears verbatim in the text after the gateway's
own masking function (``pii.placeholders.Masker``, tokenize mode) has replaced every span
the detector returned, whatever their types. Every span on a look-alike text is a false
positive.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
Find = Callable[[str], list[tuple[int, int, str]]]
TYPES = ("PHONE", "CREDIT_CARD", "STREET_ADDRESS", "EMAIL", "IBAN", "US_SSN", "IP_ADDRESS", "PERSON")


def load(split: str) -> list[dict]:
    """Rows of ``pii_<split>.jsonl`` (split: dev or test)."""
    with open(HERE / f"pii_{split}.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


@dataclass
class Score:
    planted: Counter = field(default_factory=Counter)
    found: Counter = field(default_factory=Counter)
    reached: Counter = field(default_factory=Counter)    # planted values left verbatim after masking
    false_pos: Counter = field(default_factory=Counter)  # spans on look-alike texts, per type
    misses: list = field(default_factory=list)           # (type, value) not found
    fp_examples: list = field(default_factory=list)      # (type, span text, family)
    lookalikes: int = 0

    def recall(self, kind: str) -> float:
        return self.found[kind] / self.planted[kind] if self.planted[kind] else float("nan")

    def reached_share(self) -> float:
        total = sum(self.planted.values())
        return sum(self.reached.values()) / total if total else 0.0


def score(find: Find, rows: list[dict], types: tuple[str, ...] = TYPES) -> Score:
    """Recall per type, planted values reaching the backend, false positives on look-alikes."""
    from tokenward.pii.placeholders import Masker

    out = Score()
    for row in rows:
        text = row["text"]
        spans = find(text)
        if row["lookalike"]:
            out.lookalikes += 1
            for s, e, kind in spans:
                out.false_pos[kind] += 1
                out.fp_examples.append((kind, text[s:e], row.get("family", "")))
            continue
        masked = Masker(restore=True).mask(text, spans)
        for ent in row["entities"]:
            kind = ent["type"]
            if kind not in types:
                continue
            out.planted[kind] += 1
            a, b = ent["start"], ent["end"]
            if any(s <= a and e >= b and k == kind for s, e, k in spans):
                out.found[kind] += 1
            else:
                out.misses.append((kind, ent["value"]))
            if ent["value"] in masked:
                out.reached[kind] += 1
    return out
