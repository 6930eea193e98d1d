"""A tiny discrete-event loop for the scenarios: (time, order, action) in a heap, so events
at the same instant run in the order they were scheduled and every run is the same."""

from __future__ import annotations

import heapq
import itertools
from typing import Awaitable, Callable

from ..sim import Clock

Action = Callable[[], Awaitable[None]]
Tick = Callable[[float], None]   # the share of the run done so far, for a progress line


def part_of(tick: Tick, n: int, parts: int) -> Tick:
    """The tick of the n-th of ``parts`` equal parts of a run."""
    return lambda f: tick((n + f) / parts)


class Events:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._heap: list[tuple[float, int, Action]] = []
        self._order = itertools.count()

    def at(self, elapsed: float, action: Action) -> None:
        heapq.heappush(self._heap, (round(elapsed, 6), next(self._order), action))

    def after(self, seconds: float, action: Action) -> None:
        self.at(self.clock.elapsed + seconds, action)

    async def run(self, until: float, tick: Callable[[float], None] | None = None) -> None:
        while self._heap and self._heap[0][0] <= until:
            when, _, action = heapq.heappop(self._heap)
            self.clock.at(when)
            await action()
            if tick is not None:
                tick(when / until)
        self.clock.at(until)


def per_window(times: list[float], weights: list[float], window: float, until: float) -> tuple[list[float], list[float]]:
    """Sums per window of ``window`` seconds, as a rate per minute, at each window's end."""
    bins = [0.0] * int(until / window)
    for t, w in zip(times, weights):
        at = int(t / window)
        if at < len(bins):
            bins[at] += w
    scale = 60.0 / window
    return [round((i + 1) * window, 3) for i in range(len(bins))], [b * scale for b in bins]


def cumulative(times: list[float], weights: list[float], step: float, until: float) -> tuple[list[float], list[float]]:
    """The running total at every ``step`` seconds."""
    xs, ys, total, i = [], [], 0.0, 0
    pairs = sorted(zip(times, weights))
    t = 0.0
    while t <= until + 1e-9:
        while i < len(pairs) and pairs[i][0] <= t + 1e-9:
            total += pairs[i][1]
            i += 1
        xs.append(round(t, 3))
        ys.append(total)
        t += step
    return xs, ys
