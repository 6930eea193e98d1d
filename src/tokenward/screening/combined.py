"""Several injection detectors behind one policy (``detectors: [heuristic, classifier]``).

Each scores the request's texts; ``combine: max`` takes the highest score, ``combine:
weighted`` the weighted mean (``weights``, 1 each by default). The synchronous ones (the
heuristic) answer at once; when any answers later (a model in a thread, a service) the
whole is awaitable and the policy's ``timeout_ms`` bounds it. One detector that fails
fails the whole: ``on_failure`` decides, as for a single detector. The spans are all the
detectors' spans, each labelled as its detector labels it.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, Sequence

from .screener import Screener, ScreenResult


class Combined:
    def __init__(self, parts: list[Screener], combine: str = "max", weights: dict[str, float] | None = None) -> None:
        names = [part.name for part in parts]
        if len(parts) < 2 or len(set(names)) != len(names):
            raise ValueError(f"detectors: name two or more different detectors, got {names}")
        if combine not in ("max", "weighted"):
            raise ValueError(f"combine: max or weighted, got {combine!r}")
        weights = dict(weights or {})
        if unknown := set(weights) - set(names):
            raise ValueError(f"weights: {', '.join(sorted(unknown))} not among the detectors {names}")
        if any(not w > 0 for w in weights.values()):
            raise ValueError("weights: each must be > 0")
        self.parts = parts
        self.name = "+".join(names)
        self._weighted = combine == "weighted"
        self._weights = [float(weights.get(name, 1.0)) for name in names]

    def screen(self, texts: Sequence[str]) -> ScreenResult | Any:
        results: list[Any] = [part.screen(texts) for part in self.parts]
        if all(type(r) is ScreenResult or not inspect.isawaitable(r) for r in results):
            return self._combine(results)
        return self._later(results)

    async def _later(self, results: list[Any]) -> ScreenResult:
        waiting = [r for r in results if inspect.isawaitable(r)]
        try:
            answers = iter(await asyncio.gather(*waiting))
        except BaseException:
            for r in waiting:                              # one failed or the budget ran out: stop the rest
                if isinstance(r, asyncio.Future) or inspect.iscoroutine(r):
                    (r.cancel() if isinstance(r, asyncio.Future) else r.close())
            raise
        return self._combine([next(answers) if inspect.isawaitable(r) else r for r in results])

    def _combine(self, results: list[ScreenResult]) -> ScreenResult:
        scores = [r.score for r in results]
        if self._weighted:
            score = sum(w * s for w, s in zip(self._weights, scores)) / sum(self._weights)
        else:
            score = max(scores)
        return ScreenResult(round(score, 4), [span for r in results for span in r.spans])


__all__ = ["Combined"]
