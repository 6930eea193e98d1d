"""The built-in detectors behind the ``Screener`` protocol, by the names the config uses.

injection: ``heuristic`` (screening/injection.py, the light default), ``tool_output``
(screening/tool_output.py: the heuristic plus instructions addressed to the assistant, for
tool results and documents), ``classifier``
(the optional ML extra, screening/classifier.py) and ``http`` (a service the operator runs,
screening/remote.py), alone or several combined (screening/combined.py). personal data: ``patterns``
(pii/patterns.py, validated patterns) and ``presidio`` (the optional extra,
pii/presidio.py). Any of them may be replaced by ``python:module:factory``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable, Iterable, Protocol, Sequence

from ..memos import MIN_CHARS, TextMemo
from ..pii.spans import Span as Found
from .screener import Screener, ScreenResult, Span, Threaded, load

if TYPE_CHECKING:
    from ..config.content import InjectionScreening

# one signal an injection detector found in a text: (start, end, signal name)
Signal = tuple[int, int, str]


class InjectionDetector(Protocol):
    """The built-in injection detectors (injection.py, tool_output.py)."""

    name: str

    def score(self, texts: Sequence[str]) -> tuple[float, list[tuple[int, int, int, str]]]:
        """(score, [(text index, start, end, signal)])."""
        ...

    def signals(self, text: str) -> tuple[Signal, ...]:
        """One text's signals, with no score: what a request's score is combined from."""
        ...


class PiiDetector(Protocol):
    """The personal-data detectors (pii/patterns.py, pii/presidio.py)."""

    name: str

    def find(self, text: str) -> list[Found]: ...


class InjectionScreener:
    """A detector with ``score(texts) -> (score, [(text, start, end, signal)])`` and ``WEIGHTS``:
    each text read once (remembered), the score combined over the request's distinct signals
    as the detector does (``1 - exp(-sum of their weights)``)."""

    def __init__(self, detector: InjectionDetector, weights: dict[str, tuple[float, str]]) -> None:
        self.detector = detector
        self.name = detector.name
        self._weights = weights
        signals = detector.signals
        self._read = signals
        # what a detector found in one text depends on the text alone, and a conversation sends
        # its system prompt and history again every turn: remembered, per tenant (memos.py)
        self._signals = TextMemo(signals).get

    def screen(self, texts: Sequence[str]) -> ScreenResult:
        signals, direct, short = self._signals, self._read, MIN_CHARS
        spans = [Span(i, a, b, name) for i, text in enumerate(texts) if text
                 for a, b, name in (direct(text) if len(text) < short else signals(text))]
        if not spans:
            return ScreenResult(0.0, spans)
        z = sum(self._weights[name][0] for name in {span.label for span in spans})
        return ScreenResult(round(1.0 - math.exp(-z), 4) if z > 0 else 0.0, spans)


class PiiScreener:
    """A detector with ``find(text) -> [(start, end, ENTITY)]``: score 1 when anything is found."""

    def __init__(self, detector: PiiDetector, remember: bool = True) -> None:
        self.detector = detector
        self.name = detector.name
        self._direct = detector.find
        self._find: Callable[[str], Sequence[Found]] = (
            TextMemo(lambda text: tuple(detector.find(text))).get if remember else detector.find)

    def screen(self, texts: Sequence[str]) -> ScreenResult:
        find, direct, short = self._find, self._direct, MIN_CHARS
        spans = [Span(i, start, end, label) for i, text in enumerate(texts)
                 for start, end, label in (direct(text) if len(text) < short else find(text))]
        return ScreenResult(1.0 if spans else 0.0, spans)


def _heuristic() -> Screener:
    from .injection import WEIGHTS, HeuristicInjection

    return InjectionScreener(HeuristicInjection(), WEIGHTS)


def _tool_output() -> Screener:
    from .tool_output import WEIGHTS_ALL, ToolOutputInjection

    return InjectionScreener(ToolOutputInjection(), WEIGHTS_ALL)


def _classifier() -> Screener:
    from .classifier import ClassifierInjection, shared_encoder

    return ClassifierInjection(encoder=shared_encoder())


def _patterns(entities: Iterable[str] | None = None, regions: Iterable[str] | None = None) -> Screener:
    from ..pii.patterns import PatternDetector

    return PiiScreener(PatternDetector(entities, regions))


def _presidio(entities: Iterable[str] | None = None, regions: Iterable[str] | None = None) -> Screener:
    from ..pii.presidio import PresidioDetector

    if regions:
        raise ValueError("regions apply to detector: patterns (the built-in phones and streets by country)")
    # ~60 ms of spaCy per 2 KB prompt: off the event loop, within the policy's budget
    screener = Threaded(PiiScreener(PresidioDetector(entities)))
    screener.default_timeout_ms = PresidioDetector.DEFAULT_TIMEOUT_MS  # a policy without timeout_ms
    return screener


INJECTION = {"heuristic": _heuristic, "tool_output": _tool_output, "classifier": _classifier}
PII = {"patterns": _patterns, "presidio": _presidio}


def injection_screener(spec: str, cfg: InjectionScreening | None = None) -> Screener:
    """The policy's injection screener: ``spec`` (a name or ``python:module:factory``), or,
    when the policy (``cfg``, config.content.InjectionScreening) names ``detectors``, all of
    them combined (screening/combined.py). ``http`` takes its settings from ``cfg.http``."""
    if cfg is not None and cfg.detectors:
        from .combined import Combined

        return Combined([_injection_one(name, cfg) for name in cfg.detectors], cfg.combine, cfg.weights)
    if cfg is not None and (cfg.weights or cfg.combine != "max"):
        raise ValueError("combine and weights apply to detectors: [...] (two or more)")
    return _injection_one(spec, cfg)


def _injection_one(spec: str, cfg: InjectionScreening | None) -> Screener:
    if spec == "http":
        if cfg is None or cfg.http is None:
            raise ValueError("detector http needs an http: section (url, api, model)")
        from .remote import RemoteInjection

        return RemoteInjection(cfg.http)
    return load(spec, INJECTION)


def pii_screener(spec: str, entities: Iterable[str] | None, regions: Iterable[str] | None = None) -> Screener:
    return load(spec, PII, entities=entities, **({"regions": regions} if regions else {}))
