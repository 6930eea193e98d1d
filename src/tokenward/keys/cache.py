"""An in-process cache of key lookups, by key id, for a short TTL.

The hot path is ``fresh(key_id)``: a dict lookup and a clock read, no await. A miss
goes through ``load(key_id)``, which asks the store once however many requests are
waiting for the same id (single flight). Unknown ids are cached too (as ``None``), so
a flood of made-up keys cannot turn into a flood of database reads.

Revocation must reach every replica within a second: with no invalidation channel the
TTL is capped at one second; with one (Redis pub/sub) the configured TTL applies and
``invalidate`` drops an entry the moment a change is announced. A generation counter
keeps a lookup that raced with an invalidation from caching what it read.
"""

from __future__ import annotations

import asyncio
import enum
import time
from typing import Awaitable, Callable, Final, Generic, Literal, TypeVar

T = TypeVar("T")


class _Miss(enum.Enum):
    MISS = enum.auto()


# Not cached (or expired): a sentinel of its own type, so ``is MISS`` narrows for mypy.
MISS: Final = _Miss.MISS
MAX_TTL_WITHOUT_INVALIDATION_S = 1.0


class KeyCache(Generic[T]):
    def __init__(self, load: Callable[[str], Awaitable[T | None]], ttl_s: float,
                 max_entries: int = 100_000, clock: Callable[[], float] = time.monotonic) -> None:
        self._load = load
        self._configured_ttl = max(ttl_s, 0.0)
        self.ttl_s = min(self._configured_ttl, MAX_TTL_WITHOUT_INVALIDATION_S)
        self._max_entries = max_entries
        self._clock = clock
        self._entries: dict[str, tuple[T | None, float]] = {}
        self._inflight: dict[str, asyncio.Future[T | None]] = {}
        self._generation = 0
        self.loads = 0

    def set_invalidation_live(self, live: bool) -> None:
        """Called by the invalidation channel: a live channel permits the configured TTL."""
        self.ttl_s = self._configured_ttl if live else min(self._configured_ttl, MAX_TTL_WITHOUT_INVALIDATION_S)
        # Entries cached under the other regime may have missed an announcement.
        self.clear()

    def fresh(self, key_id: str) -> T | None | Literal[_Miss.MISS]:
        """The cached value (``None`` = known not to exist), or ``MISS``."""
        entry = self._entries.get(key_id)
        if entry is not None and entry[1] > self._clock():
            return entry[0]
        return MISS

    async def load(self, key_id: str) -> T | None:
        task = self._inflight.get(key_id)
        if task is None:
            # A task of its own: a caller that is cancelled does not cancel the others' lookup.
            task = asyncio.ensure_future(self._load_and_keep(key_id, self._generation))
            self._inflight[key_id] = task
            task.add_done_callback(lambda _t: self._inflight.pop(key_id, None))
        return await asyncio.shield(task)

    async def _load_and_keep(self, key_id: str, generation: int) -> T | None:
        self.loads += 1
        # The entry's age counts from before the read: what it says is at most TTL old.
        read_at = self._clock()
        value = await self._load(key_id)
        if generation == self._generation and self.ttl_s > 0:
            if len(self._entries) >= self._max_entries:
                self._entries.clear()
            self._entries[key_id] = (value, read_at + self.ttl_s)
        return value

    def invalidate(self, key_id: str) -> None:
        self._generation += 1
        self._entries.pop(key_id, None)

    def clear(self) -> None:
        self._generation += 1
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
