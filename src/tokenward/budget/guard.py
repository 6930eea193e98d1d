"""A circuit breaker in front of the budget store: fail fast while it is down, recover alone.

After a failure, calls are refused at once (no timeout to wait out per request) until a
backoff passes; then one call probes the store. A success closes the breaker; a failure
doubles the backoff, up to a ceiling. Nobody has to reset anything when the store returns.

The ceiling is 250 ms: it is how long requests can still be refused after the store is
back (a 200 ms pause once cost 800 ms of refusals under a one-second ceiling), against
at most four probes a second, one call each, at a store that is down.
"""

from __future__ import annotations

import time
from typing import Callable


class Breaker:
    __slots__ = ("_clock", "_first", "_max", "_backoff", "_retry_at", "_probing", "down", "failures")

    def __init__(self, clock: Callable[[], float] = time.monotonic, first_backoff_s: float = 0.05,
                 max_backoff_s: float = 0.25) -> None:
        self._clock = clock
        self._first = first_backoff_s
        self._max = max_backoff_s
        self._backoff = first_backoff_s
        self._retry_at = 0.0
        self._probing = False
        self.down = False
        self.failures = 0

    def allow(self) -> bool:
        """May a call go to the store now? While down, only one probe after the backoff."""
        if not self.down:
            return True
        if self._probing or self._clock() < self._retry_at:
            return False
        self._probing = True
        return True

    def success(self) -> None:
        if self.down:
            self.down = False
            self._backoff = self._first
        self._probing = False

    def abandon(self) -> None:
        """A call that ended without an answer either way (cancelled): let another probe."""
        self._probing = False

    def failure(self) -> None:
        self.failures += 1
        now = self._clock()
        if self.down:
            self._backoff = min(self._backoff * 2, self._max)
        self.down = True
        self._probing = False
        self._retry_at = now + self._backoff
