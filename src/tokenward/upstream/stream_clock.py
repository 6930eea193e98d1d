"""Idle and duration deadlines of open streams, checked by one timer per process.

Arming and cancelling a timer around every chunk read costs more than anything else the
relay does per chunk apart from the socket work. Instead each open stream notes when it
last heard from the backend, and one periodic check ends the streams that are past a
deadline by aborting their backend response, which wakes the relay's pending read.
Deadlines are therefore honoured to within one tick (a quarter of the shorter limit,
at most one second).
"""

from __future__ import annotations

import asyncio

from ..errors import Reason
from .response_head import Response


class OpenStream:
    """One relayed stream; ``waiting_since`` is set only while it waits on the backend,
    so time spent writing to a slow client never counts as the backend being idle."""

    __slots__ = ("resp", "waiting_since", "deadline", "expired")

    def __init__(self, resp: Response, now: float, deadline: float) -> None:
        self.resp = resp
        self.waiting_since: float | None = None
        self.deadline = deadline
        self.expired: Reason | None = None


class StreamClock:
    def __init__(self, loop: asyncio.AbstractEventLoop, idle_s: float, max_duration_s: float) -> None:
        self.now = loop.time
        self._loop = loop
        self.idle_s = idle_s
        self.max_duration_s = max_duration_s
        self.tick_s = max(0.01, min(idle_s, max_duration_s, 4.0) / 4)
        self._open: set[OpenStream] = set()
        self._timer: asyncio.TimerHandle | None = None

    def open(self, resp: Response) -> OpenStream:
        now = self.now()
        stream = OpenStream(resp, now, now + self.max_duration_s)
        self._open.add(stream)
        if self._timer is None:
            self._timer = self._loop.call_later(self.tick_s, self._check)
        return stream

    def close(self, stream: OpenStream) -> None:
        self._open.discard(stream)

    def _check(self) -> None:
        now = self.now()
        idle_before = now - self.idle_s
        for stream in [s for s in self._open if s.deadline <= now
                       or (s.waiting_since is not None and s.waiting_since <= idle_before)]:
            stream.expired = (Reason.stream_duration_exceeded if stream.deadline <= now
                              else Reason.stream_idle_timeout)
            self._open.discard(stream)
            stream.resp.abort()
        self._timer = self._loop.call_later(self.tick_s, self._check) if self._open else None
