"""What a gateway opened at start-up, closed in reverse order at shutdown.

Every part that opens something (a store's connections, a background task, a worker pool)
registers its closer here while the gateway is assembled (assemble/gateway.py); stopping
the gateway, or an assembly that fails half-way, closes them newest first, so a part is
closed before what it uses (last-used times flushed before the key store closes).
"""

from __future__ import annotations

import logging
from typing import Awaitable, Callable

log = logging.getLogger("tokenward")

Closer = Callable[[], Awaitable[None]]


class Closers:
    __slots__ = ("_closers",)

    def __init__(self) -> None:
        self._closers: list[Closer] = []

    def add(self, closer: Closer) -> None:
        self._closers.append(closer)

    async def close_all(self) -> None:
        """Each closer once, newest first; one that fails is logged and the rest still run."""
        while self._closers:
            closer = self._closers.pop()
            try:
                await closer()
            except Exception:
                log.exception("error while shutting down")
