"""UpstreamPool against real servers on 127.0.0.1 that speak exact bytes."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time

import pytest

from tokenward.upstream.client import (
    UpstreamConnectError,
    UpstreamError,
    UpstreamPool,
    UpstreamProtocolError,
    UpstreamTimeout,
)

OK_HELLO = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Test: yes\r\n\r\nhello"


class Server:
    """asyncio.start_server wrapper that counts connections and keeps what it read."""

    def __init__(self, handler):
        self.handler = handler
        self.connections = 0
        self.active = 0
        self.max_active = 0
        self.requests: list[bytes] = []
        self.tasks: set[asyncio.Task] = set()

    async def __aenter__(self) -> Server:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        return self

    async def __aexit__(self, *exc) -> None:
        self.server.close()
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.server.wait_closed()

    async def _serve(self, reader, writer) -> None:
        self.tasks.add(asyncio.current_task())
        self.connections += 1
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            await self.handler(reader, writer, self)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self.active -= 1
            writer.close()
            self.tasks.discard(asyncio.current_task())

    async def read_request(self, reader) -> bytes:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        body = await reader.readexactly(length) if length else b""
        self.requests.append(head + body)
        return head


def respond_with(*responses: bytes, delay: float = 0.0):
    """Handler: answer each request on a connection with the next response (last repeats)."""

    async def handler(reader, writer, srv):
        n = 0
        while True:
            await srv.read_request(reader)
            if delay:
                await asyncio.sleep(delay)
            writer.write(responses[min(n, len(responses) - 1)])
            await writer.drain()
            n += 1

    return handler


async def wait_eof(reader) -> float:
    """Block until the client goes away; return when (loop time)."""
    try:
        while await reader.read(65536):
            pass
    except ConnectionError:
        pass
    return asyncio.get_running_loop().time()


@contextlib.asynccontextmanager
async def serve(handler, **pool_kw):
    async with Server(handler) as srv:
        pool = UpstreamPool(srv.url, **pool_kw)
        try:
            yield srv, pool
        finally:
            await pool.aclose()


# -- bodies ----------------------------------------------------------------------------


async def test_content_length_body_and_exact_request_bytes():
    async with serve(respond_with(OK_HELLO)) as (srv, pool):
        resp = await pool.request("POST", "/chat/completions", [(b"x-a", b"1")], b"{}")
        assert resp.status == 200
        assert resp.headers == [(b"content-length", b"5"), (b"x-test", b"yes")]
        assert resp.header(b"x-test") == b"yes" and resp.header(b"nope") is None
        assert await resp.read() == b"hello"
        assert resp.complete
    assert srv.requests[0] == (
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:%d\r\n"
        b"x-a: 1\r\ncontent-length: 2\r\n\r\n{}" % srv.port
    )


async def test_a_body_past_64_kib_goes_out_whole_after_its_head():
    # above _SMALL_BODY the head and the body are handed over as two parts (one writev)
    body = b'{"content":"' + bytes(range(97, 123)) * 3000 + b'"}'
    async with serve(respond_with(OK_HELLO)) as (srv, pool):
        for _ in range(2):   # and the connection is reused after it
            resp = await pool.request("POST", "/chat/completions", [(b"x-a", b"1")], body)
            assert await resp.read() == b"hello"
    assert srv.requests == [(
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:%d\r\n"
        b"x-a: 1\r\ncontent-length: %d\r\n\r\n" % (srv.port, len(body))) + body] * 2


async def test_get_without_body_has_no_content_length_and_framing_headers_are_ours():
    async with serve(respond_with(OK_HELLO)) as (srv, pool):
        hdrs = [(b"host", b"evil"), (b"content-length", b"99"), (b"x-b", b"2")]
        await (await pool.request("GET", "/models", hdrs, b"")).read()
        big = b"x" * 200_000
        assert await (await pool.request("PUT", "/big", [], big)).read() == b"hello"
    assert srv.requests[0] == b"GET /v1/models HTTP/1.1\r\nhost: 127.0.0.1:%d\r\nx-b: 2\r\n\r\n" % srv.port
    assert srv.requests[1].endswith(b"content-length: 200000\r\n\r\n" + big)


async def test_invalid_path_rejected():
    pool = UpstreamPool("http://127.0.0.1:1/v1")
    with pytest.raises(ValueError):
        await pool.request("GET", "/a b", [], b"")
    with pytest.raises(ValueError):
        await pool.request("GET", "/a\r\nx: y", [], b"")
    with pytest.raises(ValueError):
        await pool.request("GET /x HTTP/1.1\r\n", "/", [], b"")


async def test_chunked_body_split_across_writes_with_extension():
    pieces = [
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n",
        b"\r\n5;name=val\r\nhel",
        b"lo\r\n",
        b"6\r\n world\r\n0\r",
        b"\n\r\n",
    ]

    async def handler(reader, writer, srv):
        while True:
            await srv.read_request(reader)
            for piece in pieces:
                writer.write(piece)
                await writer.drain()
                await asyncio.sleep(0.005)

    async with serve(handler) as (srv, pool):
        for _ in range(2):
            resp = await pool.request("GET", "/x", [], b"")
            assert resp.header(b"transfer-encoding") == b"chunked"
            assert await resp.read() == b"hello world"
        assert srv.connections == 1


async def test_next_chunk_streams_before_body_ends():
    go_on = asyncio.Event()

    async def handler(reader, writer, srv):
        await srv.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7\r\ndata: 1\r\n")
        await go_on.wait()
        writer.write(b"7\r\ndata: 2\r\n0\r\n\r\n")
        await wait_eof(reader)

    async with serve(handler) as (srv, pool):
        resp = await pool.request("POST", "/s", [], b"{}")
        assert await resp.next_chunk(timeout=2) == b"data: 1"
        assert not resp.complete
        go_on.set()
        rest = [chunk async for chunk in resp]
        assert b"".join(rest) == b"data: 2"
        assert resp.complete and await resp.next_chunk() is None
        assert pool.stats == {"open": 1, "idle": 1, "waiting": 0}


async def test_read_until_close_body_is_not_reused():
    async def handler(reader, writer, srv):
        await srv.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\n\r\npart1")
        await writer.drain()
        await asyncio.sleep(0.01)
        writer.write(b"part2")

    async with serve(handler) as (srv, pool):
        for _ in range(2):
            resp = await pool.request("GET", "/x", [], b"")
            assert await resp.read() == b"part1part2"
        assert srv.connections == 2
        assert pool.stats["open"] == 0


@pytest.mark.parametrize(
    "method,response",
    [
        ("HEAD", b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n"),
        ("HEAD", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"),
        ("GET", b"HTTP/1.1 204 No Content\r\n\r\n"),
        ("GET", b"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n"),
    ],
)
async def test_bodyless_responses_keep_connection(method, response):
    async with serve(respond_with(response, OK_HELLO)) as (srv, pool):
        resp = await pool.request(method, "/x", [], b"")
        assert await resp.read() == b"" and resp.complete
        assert await (await pool.request("GET", "/x", [], b"")).read() == b"hello"
        assert srv.connections == 1


async def test_interim_responses_are_skipped():
    resp_bytes = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + OK_HELLO
    async with serve(respond_with(resp_bytes)) as (srv, pool):
        resp = await pool.request("POST", "/x", [], b"a")
        assert resp.status == 200 and resp.headers[0] == (b"content-length", b"5")
        assert await resp.read() == b"hello"


async def test_large_body_flow_control_pauses_and_resumes():
    size = 6 * 1024 * 1024

    async def handler(reader, writer, srv):
        await srv.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size)
        writer.write(b"z" * size)
        await writer.drain()
        await wait_eof(reader)

    async with serve(handler) as (srv, pool):
        resp = await pool.request("GET", "/big", [], b"")
        await asyncio.sleep(0.2)  # the server pushes as fast as it can; we don't read
        assert resp._conn is not None and resp._conn.paused
        assert resp._size < 3 * 1024 * 1024
        got = 0
        while (chunk := await resp.next_chunk(timeout=5)) is not None:
            got += len(chunk)
        assert got == size and pool.stats["idle"] == 1


# -- keep-alive --------------------------------------------------------------------------


async def test_keep_alive_reuses_one_connection():
    async with serve(respond_with(OK_HELLO)) as (srv, pool):
        for _ in range(10):
            assert await (await pool.request("GET", "/x", [], b"")).read() == b"hello"
        assert srv.connections == 1
        assert pool.stats == {"open": 1, "idle": 1, "waiting": 0}


async def test_connection_close_is_not_reused():
    close = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
    async with serve(respond_with(close)) as (srv, pool):
        for _ in range(3):
            assert await (await pool.request("GET", "/x", [], b"")).read() == b"ok"
        assert srv.connections == 3
        assert pool.stats["open"] == 0


async def test_extra_bytes_after_response_prevent_reuse():
    junk = OK_HELLO + b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
    async with serve(respond_with(junk)) as (srv, pool):
        for _ in range(2):
            assert await (await pool.request("GET", "/x", [], b"")).read() == b"hello"
        assert srv.connections == 2


async def test_a_written_request_is_never_sent_again():
    """The backend reads the second request on a kept-alive connection and closes without a
    byte: it may be generating, so the request is not resent (the pool used to retry it
    on a fresh connection, and the backend got it twice); the error is not a connect error,
    which would mean "nothing was sent"."""
    async def handler(reader, writer, srv):
        await srv.read_request(reader)
        writer.write(OK_HELLO)
        await writer.drain()
        if srv.connections == 1:
            await srv.read_request(reader)  # second request arrives: close without a byte
        else:
            await respond_with(OK_HELLO)(reader, writer, srv)

    async with serve(handler) as (srv, pool):
        assert await (await pool.request("POST", "/x", [], b"1")).read() == b"hello"
        with pytest.raises(UpstreamProtocolError, match="after the request was sent") as caught:
            await pool.request("POST", "/x", [], b"2")
        assert not isinstance(caught.value, UpstreamConnectError)
        assert [r[-1:] for r in srv.requests] == [b"1", b"2"]
        assert srv.connections == 1
        assert await (await pool.request("POST", "/x", [], b"3")).read() == b"hello"   # a new connection


async def test_an_idle_connection_past_the_idle_timeout_is_not_reused():
    async with Server(respond_with(OK_HELLO)) as srv:
        pool = UpstreamPool(srv.url, idle_timeout=0.05)
        try:
            assert await (await pool.request("GET", "/x", [], b"")).read() == b"hello"
            assert await (await pool.request("GET", "/x", [], b"")).read() == b"hello"
            assert srv.connections == 1          # reused while fresh
            await asyncio.sleep(0.1)
            assert await (await pool.request("GET", "/x", [], b"")).read() == b"hello"
            assert srv.connections == 2          # idle too long: a new one
        finally:
            await pool.aclose()


async def test_no_retry_after_a_response_byte():
    async def handler(reader, writer, srv):
        await srv.read_request(reader)
        writer.write(OK_HELLO)
        await srv.read_request(reader)
        writer.write(b"HTTP/1.1 20")
        await writer.drain()

    async with serve(handler) as (srv, pool):
        await (await pool.request("GET", "/x", [], b"")).read()
        with pytest.raises(UpstreamProtocolError):
            await pool.request("GET", "/x", [], b"")
        assert srv.connections == 1 and len(srv.requests) == 2


async def test_fresh_connection_closed_without_response_is_not_a_connect_error():
    async def handler(reader, writer, srv):
        await srv.read_request(reader)

    async with serve(handler) as (srv, pool):
        with pytest.raises(UpstreamProtocolError, match="after the request was sent"):
            await pool.request("GET", "/x", [], b"")
        assert srv.connections == 1
        assert pool.stats["open"] == 0


# -- failures ----------------------------------------------------------------------------


async def test_connection_refused():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    pool = UpstreamPool(f"http://127.0.0.1:{port}")
    with pytest.raises(UpstreamConnectError) as info:
        await pool.request("GET", "/", [], b"")
    assert "cannot connect" in info.value.detail
    assert pool.stats["open"] == 0


async def test_connect_timeout(monkeypatch):
    loop = asyncio.get_running_loop()

    async def hang(*args, **kwargs):
        await asyncio.Event().wait()

    monkeypatch.setattr(loop, "create_connection", hang)
    pool = UpstreamPool("http://127.0.0.1:9/v1", connect_timeout=0.05)
    with pytest.raises(UpstreamTimeout) as info:
        await pool.request("GET", "/", [], b"")
    assert info.value.phase == "connect"
    assert pool.stats["open"] == 0


async def test_read_timeout_waiting_for_headers():
    closed_at = asyncio.get_running_loop().create_future()

    async def handler(reader, writer, srv):
        await srv.read_request(reader)
        closed_at.set_result(await wait_eof(reader))

    async with serve(handler, read_timeout=0.1) as (srv, pool):
        start = time.monotonic()
        with pytest.raises(UpstreamTimeout) as info:
            await pool.request("GET", "/x", [], b"")
        assert info.value.phase == "read"
        assert 0.09 < time.monotonic() - start < 1
        await asyncio.wait_for(closed_at, 1)
        assert pool.stats["open"] == 0


async def test_idle_timeout_between_chunks():
    async def handler(reader, writer, srv):
        await srv.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n")
        await wait_eof(reader)

    async with serve(handler) as (srv, pool):
        resp = await pool.request("GET", "/x", [], b"", timeout=1)
        assert await resp.next_chunk(timeout=0.05) == b"abc"
        with pytest.raises(UpstreamTimeout) as info:
            await resp.next_chunk(timeout=0.05)
        assert info.value.phase == "read"
        with pytest.raises(UpstreamTimeout):
            await resp.read()
        assert pool.stats["open"] == 0


async def test_read_timeout_bounds_the_whole_body():
    async def handler(reader, writer, srv):
        await srv.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(100):  # never idle for long, never finished in time
            writer.write(b"1\r\nx\r\n")
            await writer.drain()
            await asyncio.sleep(0.01)

    async with serve(handler) as (srv, pool):
        resp = await pool.request("GET", "/x", [], b"")
        start = time.monotonic()
        with pytest.raises(UpstreamTimeout) as info:
            await resp.read(timeout=0.1)
        assert info.value.phase == "read" and time.monotonic() - start < 0.5
        assert pool.stats["open"] == 0


async def test_switching_protocols_is_protocol_error():
    upgrade = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n"
    async with serve(respond_with(upgrade)) as (srv, pool):
        with pytest.raises(UpstreamProtocolError):
            await pool.request("GET", "/x", [], b"")
        assert pool.stats["open"] == 0


@pytest.mark.parametrize(
    "response",
    [
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello",
        b"HTTP/1.1 200 OK\r\nContent-Le",
    ],
)
async def test_truncated_response_is_protocol_error(response):
    async def handler(reader, writer, srv):
        await srv.read_request(reader)
        writer.write(response)

    async with serve(handler) as (srv, pool):
        with pytest.raises(UpstreamProtocolError):
            resp = await pool.request("GET", "/x", [], b"")
            await resp.read()
        assert pool.stats["open"] == 0


async def test_malformed_response_is_protocol_error():
    async with serve(respond_with(b"HTTP/1.1 abc nope\r\n\r\n")) as (srv, pool):
        with pytest.raises(UpstreamProtocolError) as info:
            await pool.request("GET", "/x", [], b"")
        assert "malformed" in info.value.detail
        assert pool.stats["open"] == 0


# -- pool limits ---------------------------------------------------------------------------


async def test_pool_limit_caps_concurrent_connections():
    async with serve(respond_with(OK_HELLO, delay=0.05), max_connections=2) as (srv, pool):

        async def one() -> bytes:
            return await (await pool.request("GET", "/x", [], b"")).read()

        assert await asyncio.gather(*(one() for _ in range(5))) == [b"hello"] * 5
        assert srv.max_active <= 2 and srv.connections == 2
        assert pool.stats == {"open": 2, "idle": 2, "waiting": 0}


async def test_pool_timeout():
    release = asyncio.Event()

    async def handler(reader, writer, srv):
        await srv.read_request(reader)
        await release.wait()
        writer.write(OK_HELLO)
        await wait_eof(reader)

    async with serve(handler, max_connections=1, pool_timeout=0.05) as (srv, pool):
        first = asyncio.ensure_future(pool.request("GET", "/x", [], b""))
        await asyncio.sleep(0.05)
        with pytest.raises(UpstreamTimeout) as info:
            await pool.request("GET", "/x", [], b"")
        assert info.value.phase == "pool"
        assert pool.stats == {"open": 1, "idle": 0, "waiting": 0}
        release.set()
        assert await (await first).read() == b"hello"


async def test_cancelled_pool_waiter_does_not_leak_a_slot():
    async with serve(respond_with(OK_HELLO, delay=0.05), max_connections=1) as (srv, pool):
        first = asyncio.ensure_future(pool.request("GET", "/x", [], b""))
        await asyncio.sleep(0.01)
        waiter = asyncio.ensure_future(pool.request("GET", "/x", [], b""))
        await asyncio.sleep(0.01)
        assert pool.stats["waiting"] == 1
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert await (await first).read() == b"hello"
        assert await (await pool.request("GET", "/x", [], b"")).read() == b"hello"
        assert pool.stats == {"open": 1, "idle": 1, "waiting": 0}


async def test_waiters_are_served_first_in_first_out():
    async with serve(respond_with(OK_HELLO, delay=0.01), max_connections=1) as (srv, pool):
        order = []

        async def one(name: str) -> None:
            resp = await pool.request("GET", "/x", [], b"")
            order.append(name)
            await resp.read()

        tasks = []
        for name in "abcde":
            tasks.append(asyncio.ensure_future(one(name)))
            await asyncio.sleep(0.001)  # queue them in a known order
        await asyncio.gather(*tasks)
        assert order == list("abcde") and srv.connections == 1


async def test_max_idle_closes_surplus_connections():
    async with serve(respond_with(OK_HELLO, delay=0.02), max_idle=1) as (srv, pool):

        async def one() -> bytes:
            return await (await pool.request("GET", "/x", [], b"")).read()

        await asyncio.gather(*(one() for _ in range(3)))
        assert srv.connections == 3
        assert pool.stats == {"open": 1, "idle": 1, "waiting": 0}


async def test_idle_connection_closed_by_upstream_leaves_the_pool():
    close_after_one = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

    async def handler(reader, writer, srv):
        await srv.read_request(reader)
        writer.write(close_after_one)  # then the handler returns: a keep-alive timeout

    async with serve(handler) as (srv, pool):
        assert await (await pool.request("GET", "/x", [], b"")).read() == b"ok"
        await asyncio.sleep(0.05)
        assert pool.stats == {"open": 0, "idle": 0, "waiting": 0}
        assert await (await pool.request("GET", "/x", [], b"")).read() == b"ok"
        assert srv.connections == 2


# -- abort and cancellation ----------------------------------------------------------------


def streaming_handler(closed_at: asyncio.Future):
    async def handler(reader, writer, srv):
        await srv.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        await writer.drain()
        closed_at.set_result(await wait_eof(reader))

    return handler


async def test_abort_mid_body_closes_upstream_connection_promptly():
    loop = asyncio.get_running_loop()
    closed_at = loop.create_future()
    async with serve(streaming_handler(closed_at)) as (srv, pool):
        resp = await pool.request("GET", "/x", [], b"")
        assert await resp.next_chunk() == b"first"
        t0 = loop.time()
        resp.abort()
        resp.abort()  # idempotent
        assert await asyncio.wait_for(closed_at, 1) - t0 < 0.1
        assert pool.stats == {"open": 0, "idle": 0, "waiting": 0}
        with pytest.raises(UpstreamError):
            await resp.next_chunk()


async def test_aclose_after_complete_body_keeps_connection():
    async with serve(respond_with(OK_HELLO)) as (srv, pool):
        resp = await pool.request("GET", "/x", [], b"")
        await resp.aclose()  # the body had already arrived: nothing to abort
        resp.abort()
        assert pool.stats["idle"] == 1
        assert await resp.read() == b"hello"


async def test_cancelling_next_chunk_aborts_connection():
    loop = asyncio.get_running_loop()
    closed_at = loop.create_future()
    async with serve(streaming_handler(closed_at)) as (srv, pool):
        resp = await pool.request("GET", "/x", [], b"")
        assert await resp.next_chunk() == b"first"
        task = asyncio.ensure_future(resp.next_chunk())
        await asyncio.sleep(0.01)
        t0 = loop.time()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await asyncio.wait_for(closed_at, 1) - t0 < 0.1
        assert pool.stats["open"] == 0


async def test_cancelling_request_waiting_for_headers_aborts_connection():
    loop = asyncio.get_running_loop()
    closed_at = loop.create_future()

    async def handler(reader, writer, srv):
        await srv.read_request(reader)
        closed_at.set_result(await wait_eof(reader))

    async with serve(handler) as (srv, pool):
        task = asyncio.ensure_future(pool.request("GET", "/x", [], b""))
        await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(closed_at, 1)
        assert pool.stats["open"] == 0


async def test_pool_aclose_closes_idle_and_refuses_new_requests():
    async with serve(respond_with(OK_HELLO)) as (srv, pool):
        await (await pool.request("GET", "/x", [], b"")).read()
        await pool.aclose()
        assert pool.stats["open"] == 0
        with pytest.raises(UpstreamConnectError):
            await pool.request("GET", "/x", [], b"")


async def test_pool_aclose_lets_in_flight_response_finish_then_closes_it():
    go_on = asyncio.Event()

    async def handler(reader, writer, srv):
        await srv.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nab")
        await go_on.wait()
        writer.write(b"cd")
        await wait_eof(reader)

    async with serve(handler) as (srv, pool):
        resp = await pool.request("GET", "/x", [], b"")
        await pool.aclose()
        go_on.set()
        assert await resp.read() == b"abcd"
        assert pool.stats["open"] == 0


# -- other servers and loops -----------------------------------------------------------------


async def test_against_aiohttp_streaming_server():
    from aiohttp import web

    async def stream(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        resp = web.StreamResponse(headers={"X-Echo": body.decode()})
        await resp.prepare(request)
        for i in range(3):
            await resp.write(b"event %d\n" % i)
            await asyncio.sleep(0.01)
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/stream", stream)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    pool = UpstreamPool(f"http://127.0.0.1:{port}/v1")
    try:
        for _ in range(3):
            resp = await pool.request("POST", "/stream", [(b"content-type", b"text/plain")], b"hi")
            assert resp.status == 200 and resp.header(b"x-echo") == b"hi"
            chunks = [c async for c in resp]
            assert b"".join(chunks) == b"event 0\nevent 1\nevent 2\n"
        assert pool.stats["open"] == 1
    finally:
        await pool.aclose()
        await runner.cleanup()


def test_under_uvloop():
    uvloop = pytest.importorskip("uvloop")

    async def main() -> None:
        await test_keep_alive_reuses_one_connection()
        await test_chunked_body_split_across_writes_with_extension()
        await test_abort_mid_body_closes_upstream_connection_promptly()
        await test_large_body_flow_control_pauses_and_resumes()
        await test_a_written_request_is_never_sent_again()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main())
