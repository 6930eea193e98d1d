"""Test screeners plugged in with ``detector: python:tests.screening.detectors:NAME``."""

from __future__ import annotations

import asyncio
import re

from tokenward.screening.screener import ScreenResult, Span

_SCORE = re.compile(r"SCORE=([01](?:\.\d+)?)")


class Hanging:
    """Never answers: the latency budget and on_failure decide."""

    name = "hanging"

    def screen(self, texts):
        return asyncio.sleep(3600, ScreenResult(0.0, []))


class Raising:
    name = "raising"

    def screen(self, texts):
        raise RuntimeError("model file missing")


class Fixed:
    """Scores what a text says it scores (``SCORE=0.7``): policy tests need exact scores."""

    name = "fixed"

    def screen(self, texts):
        best, spans = 0.0, []
        for i, text in enumerate(texts):
            for match in _SCORE.finditer(text):
                best = max(best, float(match.group(1)))
                spans.append(Span(i, match.start(), match.end(), "marker"))
        return ScreenResult(best, spans)


def hanging(**_):
    return Hanging()


def raising(**_):
    return Raising()


def fixed(**_):
    return Fixed()
