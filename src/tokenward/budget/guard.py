"""A circuit breaker in front of the budget store: fail fast while it is down, recover alone.

It opens after ``failures`` calls in a row have failed (``store.breaker_failures``, 5 by
default), not on one: a single call past its deadline on a healthy but busy store is that
call's failure alone, and a success between two failures starts the count again. Once
open, calls are refused at once (no timeout to wait out per request) until a backoff
passes; then one call probes the store. A success closes the breaker; a failure doubles
the backoff, up to a ceiling. Nobody has to reset anything when the store returns.

Why consecutive failures: with ``store.timeout_ms: 50`` a breaker that opened on one late
call refused 5,943 of 6,951 requests of 10 healthy clients on a 2-core host for about 3 s
(each reopening after the next late probe). A dead store still opens it within
``failures`` calls: a refused connection fails at once.

The ceiling is 250 ms: it is how long requests can still be refused after the store is
back (a 200 ms pause once cost 800 ms of refusals under a one-second ceiling), against
at most four probes a second, one call each, at a store that is down.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

log = logging.getLogger("tokenward.budget")

FAILURES = 5


class Breaker:
    __slots__ = ("_clock", "_first", "_max", "_backoff", "_retry_at", "_probing", "_threshold", "_streak",
                 "down", "failures", "opened")

    def __init__(self, clock: Callable[[], float] = time.monotonic, first_backoff_s: float = 0.05,
                 max_backoff_s: float = 0.25, failures: int = FAILURES) -> None:
        self._clock = clock
        self._first = first_backoff_s
        self._max = max_backoff_s
        self._backoff = first_backoff_s
        self._retry_at = 0.0
        self._probing = False
        self._threshold = max(int(failures), 1)
        self._streak = 0          # failures in a row since the last success
        self.down = False
        self.failures = 0         # every failure so far
        self.opened = 0           # how many times it opened

    def allow(self) -> bool:
        """May a call go to the store now? While down, only one probe after the backoff."""
        if not self.down:
            return True
        if self._probing or self._clock() < self._retry_at:
            return False
        self._probing = True
        return True

    def success(self) -> None:
        self._streak = 0
        if self.down:
            self.down = False
            self._backoff = self._first
        self._probing = False

    def abandon(self) -> None:
        """A call that ended without an answer either way (cancelled): let another probe."""
        self._probing = False

    def failure(self) -> None:
        self.failures += 1
        self._streak += 1
        if self.down:
            self._backoff = min(self._backoff * 2, self._max)
        elif self._streak < self._threshold:
            return                # closed: not yet enough failures in a row
        else:
            self.opened += 1
        self.down = True
        self._probing = False
        self._retry_at = self._clock() + self._backoff


class StoreHealth:
    """Whether the shared budget store answered its last call, for ``tokenward_budget_store_up``
    and the two log lines an operator looks for: one when it stops answering, one when it is
    back (not one per failed call). Every call through ``Guarded`` reports here, and so does
    /readyz's probe. The breaker above decides what to refuse; this only tells the truth."""

    __slots__ = ("up", "_clock", "_down_since", "downs")

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.up = True
        self._clock = clock
        self._down_since = 0.0
        self.downs = 0          # how many times it went down

    def answered(self) -> None:
        if not self.up:
            self.up = True
            log.info("budget store answering again after %.1f s down", self._clock() - self._down_since)

    def failed(self, why: BaseException | str) -> None:
        if self.up:
            self.up = False
            self.downs += 1
            self._down_since = self._clock()
            log.warning("budget store down (%s): requests fail closed (budget_store_unavailable) until it "
                        "answers, except tiers configured to fail open", why)
