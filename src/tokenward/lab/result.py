"""What a scenario hands back: its table, its plotted series and its assumptions, as plain
numbers that the JSON, the PNG and the page are all written from."""

from __future__ import annotations

from typing import Any

import json
from dataclasses import asdict, dataclass, field


@dataclass
class Series:
    label: str
    x: list[float]
    y: list[float]
    style: str = "-"          # a matplotlib line style: "-", "--", ":", "steps"


@dataclass
class Panel:
    title: str
    xlabel: str
    ylabel: str
    series: list[Series]
    marks: list[tuple[float, str]] = field(default_factory=list)   # vertical lines: (x, label)


@dataclass
class Result:
    scenario: str
    title: str
    question: str             # what the scenario answers, in one sentence
    assumptions: list[str]
    columns: list[str]
    rows: list[list[Any]]
    panels: list[Panel]
    finding: str = ""         # what the numbers say
    seed: int = 0

    def to_json(self) -> str:
        return json.dumps(_rounded(asdict(self)), indent=1, ensure_ascii=False) + "\n"


def _rounded(value: Any) -> Any:
    """Floats to 4 decimals: the JSON is the same bytes on every run and machine."""
    if isinstance(value, float):
        return round(value, 4) + 0.0
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value


def load(text: str) -> Result:
    raw = json.loads(text)
    raw["panels"] = [Panel(p["title"], p["xlabel"], p["ylabel"], [Series(**s) for s in p["series"]],
                           [tuple(m) for m in p["marks"]]) for p in raw["panels"]]
    return Result(**raw)
