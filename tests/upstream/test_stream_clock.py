"""The per-process stream clock: idle counts only while waiting on the backend."""

from __future__ import annotations

import asyncio

from tokenward.errors import Reason
from tokenward.upstream.stream_clock import StreamClock


class FakeResponse:
    def __init__(self) -> None:
        self.aborted = 0

    def abort(self) -> None:
        self.aborted += 1


async def test_idle_expires_only_a_stream_waiting_on_its_backend():
    loop = asyncio.get_running_loop()
    clock = StreamClock(loop, idle_s=0.1, max_duration_s=10)
    waiting, writing = FakeResponse(), FakeResponse()
    a, b = clock.open(waiting), clock.open(writing)
    a.waiting_since = clock.now()
    b.waiting_since = None  # busy writing to a slow client
    await asyncio.sleep(0.2)
    assert a.expired is Reason.stream_idle_timeout and waiting.aborted == 1
    assert b.expired is None and writing.aborted == 0
    clock.close(b)


async def test_duration_expires_whatever_the_stream_is_doing():
    loop = asyncio.get_running_loop()
    clock = StreamClock(loop, idle_s=10, max_duration_s=0.1)
    resp = FakeResponse()
    stream = clock.open(resp)
    await asyncio.sleep(0.2)
    assert stream.expired is Reason.stream_duration_exceeded and resp.aborted == 1


async def test_timer_stops_when_no_stream_is_open():
    loop = asyncio.get_running_loop()
    clock = StreamClock(loop, idle_s=0.04, max_duration_s=10)
    stream = clock.open(FakeResponse())
    clock.close(stream)
    await asyncio.sleep(0.05)
    assert clock._timer is None
