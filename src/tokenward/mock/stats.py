"""What the mock has seen and done, and the named barriers that hold requests."""

from __future__ import annotations

import asyncio
from typing import Any


class Stats:
    """Counters served at ``GET /_mock/stats``.

    ``active_streams`` and ``held`` are live gauges: a reset leaves them alone, because
    zeroing a gauge while work is in flight would let it go negative afterwards.
    ``peak_streams`` is the most that were active at once since the last reset.
    """

    __slots__ = (
        "requests",
        "active_streams",
        "peak_streams",
        "tokens_generated",
        "cancelled",
        "died",
        "errors",
        "by_path",
        "_last",
    )

    def __init__(self) -> None:
        self.active_streams = 0
        self.peak_streams = 0
        self.reset()

    def started(self) -> None:
        self.active_streams += 1
        if self.active_streams > self.peak_streams:
            self.peak_streams = self.active_streams

    def reset(self) -> None:
        self.peak_streams = self.active_streams
        self.requests = 0
        self.tokens_generated = 0
        self.cancelled = 0
        self.died = 0
        self.errors = 0
        self.by_path: dict[str, int] = {}
        self._last: tuple[str, list[tuple[bytes, bytes]], Any] | None = None

    def count(self, path: str) -> None:
        self.requests += 1
        self.by_path[path] = self.by_path.get(path, 0) + 1

    def record(self, path: str, headers: list[tuple[bytes, bytes]], body: Any) -> None:
        # Kept raw: decoding headers on every request would tax the fast path for a
        # value that is only read when a test asks for it.
        self._last = (path, headers, body)

    def snapshot(self, held: int) -> dict[str, Any]:
        last = None
        if self._last is not None:
            path, headers, body = self._last
            names = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in headers}
            last = {"path": path, "headers": names, "body": body}
        return {
            "requests": self.requests,
            "active_streams": self.active_streams,
            "peak_streams": self.peak_streams,
            "tokens_generated": self.tokens_generated,
            "cancelled": self.cancelled,
            "by_path": dict(self.by_path),
            "held": held,
            "died": self.died,
            "errors": self.errors,
            "last_request": last,
        }


class Holds:
    """Named barriers: requests wait under a name until released by name."""

    __slots__ = ("_waiters",)

    def __init__(self) -> None:
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}

    @property
    def count(self) -> int:
        return sum(len(w) for w in self._waiters.values())

    async def wait(self, name: str) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiters = self._waiters.setdefault(name, [])
        waiters.append(fut)
        try:
            await fut
        finally:
            # A release has already detached the list; a disconnect removes just this one.
            if self._waiters.get(name) is waiters and fut in waiters:
                waiters.remove(fut)
                if not waiters:
                    del self._waiters[name]

    def release(self, name: str | None) -> int:
        """Release every request held under ``name`` (all names when None)."""
        if name is None:
            groups = list(self._waiters.values())
            self._waiters.clear()
        else:
            groups = [self._waiters.pop(name, [])]
        released = 0
        for waiters in groups:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)
                    released += 1
        return released
