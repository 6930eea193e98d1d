"""Last-used times, recorded in memory per request and written to the store in batches.

A write per request would make the key store the bottleneck of every request; a key's
last use only needs to be right to within a few seconds.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

log = logging.getLogger("tokenward.keys")


class LastUsedBatcher:
    def __init__(self, write: Callable[[dict[str, float]], Awaitable[None]], interval_s: float) -> None:
        self._write = write
        self._interval = max(interval_s, 0.05)
        self._pending: dict[str, float] = {}
        self._task: asyncio.Task[None] | None = None
        self.batches = 0

    def touch(self, key_id: str, now: float) -> None:
        self._pending[key_id] = now

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="tokenward-last-used")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            await self.flush()

    async def flush(self) -> None:
        if not self._pending:
            return
        batch, self._pending = self._pending, {}
        try:
            await self._write(batch)
            self.batches += 1
        except Exception as exc:
            # Best effort: a store hiccup must not fail requests; the next use rewrites it.
            log.warning("could not record last-used times for %d keys: %s", len(batch), exc)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        await self.flush()
