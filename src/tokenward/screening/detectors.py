"""The built-in detectors behind the ``Screener`` protocol, by the names the config uses.

injection: ``heuristic`` (screening/injection.py, the light default) and ``classifier``
(the optional ML extra, screening/classifier.py). personal data: ``patterns``
(pii/patterns.py, validated patterns) and ``presidio`` (the optional extra,
pii/presidio.py). Any of them may be replaced by ``python:module:factory``.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from .screener import Screener, ScreenResult, Span, Threaded, load


class InjectionScreener:
    """A detector with ``score(texts) -> (score, [(text, start, end, signal)])``."""

    def __init__(self, detector) -> None:
        self.detector = detector
        self.name = detector.name

    def screen(self, texts: Sequence[str]) -> ScreenResult:
        score, signals = self.detector.score(texts)
        return ScreenResult(score, [Span(*signal) for signal in signals])


class PiiScreener:
    """A detector with ``find(text) -> [(start, end, ENTITY)]``: score 1 when anything is found."""

    def __init__(self, detector) -> None:
        self.detector = detector
        self.name = detector.name

    def screen(self, texts: Sequence[str]) -> ScreenResult:
        find = self.detector.find
        spans = [Span(i, start, end, label) for i, text in enumerate(texts) for start, end, label in find(text)]
        return ScreenResult(1.0 if spans else 0.0, spans)


def _heuristic() -> Screener:
    from .injection import HeuristicInjection

    return InjectionScreener(HeuristicInjection())


def _classifier() -> Screener:
    from .classifier import ClassifierInjection

    return ClassifierInjection()


def _patterns(entities: Iterable[str] | None = None) -> Screener:
    from ..pii.patterns import PatternDetector

    return PiiScreener(PatternDetector(entities))


def _presidio(entities: Iterable[str] | None = None) -> Screener:
    from ..pii.presidio import PresidioDetector

    # ~60 ms of spaCy per 2 KB prompt: off the event loop, within the policy's budget
    return Threaded(PiiScreener(PresidioDetector(entities)))


INJECTION = {"heuristic": _heuristic, "classifier": _classifier}
PII = {"patterns": _patterns, "presidio": _presidio}


def injection_screener(spec: str) -> Screener:
    return load(spec, INJECTION)


def pii_screener(spec: str, entities: Iterable[str] | None) -> Screener:
    return load(spec, PII, entities=entities)
