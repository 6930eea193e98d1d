"""The per-loop write batch: order kept per transport, close after queued writes, bounded."""

from __future__ import annotations

import asyncio

from tokenward import writes
from tokenward.writes import WriteBatch, batch_for


class FakeTransport:
    def __init__(self, log: list, name: str, broken: bool = False) -> None:
        self.log = log
        self.name = name
        self.closing = False
        self.broken = broken

    def is_closing(self) -> bool:
        return self.closing

    def write(self, data: bytes) -> None:
        if self.broken:
            raise RuntimeError("broken")
        self.log.append((self.name, data))

    def writelines(self, parts) -> None:
        if self.broken:
            raise RuntimeError("broken")
        self.log.append((self.name, "lines", tuple(parts)))

    def close(self) -> None:
        self.closing = True
        self.log.append((self.name, "close"))

    def abort(self) -> None:
        self.closing = True
        self.log.append((self.name, "abort"))


async def test_writes_wait_for_the_end_of_the_loop_pass_and_keep_their_order():
    log: list = []
    batch = WriteBatch(asyncio.get_running_loop())
    a, b = FakeTransport(log, "a"), FakeTransport(log, "b")
    batch.write(a, b"1")
    batch.write(b, b"x")
    batch.write(a, b"2")
    batch.close(a)
    batch.write(a, b"after close")
    assert log == []  # nothing is written synchronously
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert log == [("a", b"1"), ("b", b"x"), ("a", b"2"), ("a", "close")]


async def test_a_large_backlog_is_written_at_once(monkeypatch):
    monkeypatch.setattr(writes, "FLUSH_BYTES", 10)
    log: list = []
    batch = WriteBatch(asyncio.get_running_loop())
    t = FakeTransport(log, "t")
    batch.write(t, b"12345")
    assert log == []
    batch.write(t, b"678901")  # 11 bytes queued: over the limit
    assert log == [("t", b"12345"), ("t", b"678901")]
    batch.write(t, b"z")  # the batch keeps working after an early flush
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert log[-1] == ("t", b"z")


async def test_a_broken_transport_does_not_cost_the_others_their_writes():
    log: list = []
    batch = WriteBatch(asyncio.get_running_loop())
    bad, good = FakeTransport(log, "bad", broken=True), FakeTransport(log, "good")
    batch.write(bad, b"1")
    batch.write(good, b"2")
    batch.flush()
    assert log == [("bad", "abort"), ("good", b"2")]


async def test_a_head_and_body_go_out_in_one_writelines_in_their_place(monkeypatch):
    monkeypatch.setattr(writes, "FLUSH_BYTES", 100)
    log: list = []
    batch = WriteBatch(asyncio.get_running_loop())
    a, b = FakeTransport(log, "a"), FakeTransport(log, "b")
    batch.write(a, b"1")
    batch.write_parts(a, b"head", b"body")
    batch.write(b, b"x")
    batch.close(a)
    assert log == []
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert log == [("a", b"1"), ("a", "lines", (b"head", b"body")), ("b", b"x"), ("a", "close")]
    log.clear()
    batch.write_parts(b, b"h" * 50, b"b" * 51)   # both parts count toward the bound: flushed at once
    assert log == [("b", "lines", (b"h" * 50, b"b" * 51))]


async def test_one_batch_per_loop():
    loop = asyncio.get_running_loop()
    assert batch_for(loop) is batch_for(loop)
