"""What the upstream client and the SSE reader refuse to pass on: a body past the caller's
limit (dropped unread, the connection closed), and an event that breaks the SSE framing."""

from __future__ import annotations

import asyncio

import pytest

from tests.upstream.test_client import serve, wait_eof
from tokenward.upstream.client import UpstreamTooLarge
from tokenward.wire.sse import SseSplitter


def _body_handler(head: bytes, body: bytes, closed: asyncio.Future, repeat: int = 1):
    async def handler(reader, writer, srv):
        await srv.read_request(reader)
        writer.write(head)
        try:
            for _ in range(repeat):
                writer.write(body)
                await writer.drain()
        except ConnectionError:
            pass
        closed.set_result(await wait_eof(reader))

    return handler


async def test_a_declared_length_past_the_limit_is_refused_before_any_body_is_read():
    closed = asyncio.get_running_loop().create_future()
    head = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % (50 << 20)
    async with serve(_body_handler(head, b"x" * 65536, closed, repeat=800)) as (srv, pool):
        resp = await pool.request("POST", "/v1/chat/completions", [], b"{}")
        with pytest.raises(UpstreamTooLarge) as info:
            await resp.read(timeout=5, limit=100_000)
        assert "100000" in info.value.detail
        await asyncio.wait_for(closed, 2)            # the backend saw the gateway hang up
        assert pool.stats == {"open": 0, "idle": 0, "waiting": 0}


async def test_a_chunked_body_is_cut_once_it_passes_the_limit():
    closed = asyncio.get_running_loop().create_future()
    piece = b"x" * 4096
    chunk = b"%x\r\n%s\r\n" % (len(piece), piece)
    head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
    async with serve(_body_handler(head, chunk, closed, repeat=10_000)) as (srv, pool):
        resp = await pool.request("POST", "/v1/chat/completions", [], b"{}")
        with pytest.raises(UpstreamTooLarge):
            await resp.read(timeout=5, limit=100_000)
        await asyncio.wait_for(closed, 2)
        assert pool.stats["open"] == 0


async def test_a_body_within_the_limit_is_read_whole_and_the_connection_kept():
    async with serve(lambda r, w, s: _within(r, w, s)) as (srv, pool):
        resp = await pool.request("POST", "/v1/chat/completions", [], b"{}")
        assert await resp.read(timeout=5, limit=5) == b"hello"
        assert pool.stats["idle"] == 1


async def _within(reader, writer, srv):
    while True:
        await srv.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello")
        await writer.drain()


@pytest.mark.parametrize("raw,malformed", [
    (b'data: {"a": 1}\n\n', False),
    (b": ping\n\n", False),
    (b"event: message\nid: 7\nretry: 100\ndata: {}\n\n", False),
    (b"data:{}\r\n\r\n", False),
    (b"data\n\n", False),                            # a field with no value is SSE too
    (b"hello there\n\n", True),                      # not a field, not a comment
    (b"error: {}\n\n", True),                        # not an SSE field
    (b'data: {"a": "\xff"}\nid: 1\n\n', True),       # not UTF-8
    (b"\xff\xfe\n\n", True),
])
def test_an_event_is_malformed_when_it_breaks_the_framing(raw, malformed):
    [event] = SseSplitter().feed(raw)
    assert event.malformed is malformed
