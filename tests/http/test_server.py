"""The gateway's own HTTP/1.1 server (server.py, serving.py) over real loopback sockets.

Most checks use raw sockets because framing (chunked vs length, 100 Continue, when the
connection ends) is exactly what an HTTP client library would hide.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import socket
import time

import httpx
import pytest

from tokenward.http.serving import HttpServer, StartupFailed


def with_lifespan(handler):
    """Wrap an HTTP-only handler so start()/stop() get the lifespan answers they wait for."""

    async def app(scope, receive, send):
        if scope["type"] != "lifespan":
            return await handler(scope, receive, send)
        while True:
            message = await receive()
            kind = message["type"].rsplit(".", 1)[1]
            await send({"type": f"lifespan.{kind}.complete"})
            if kind == "shutdown":
                return

    return app


def listening_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


@contextlib.asynccontextmanager
async def serve(handler, **kwargs):
    sock = listening_socket()
    port = sock.getsockname()[1]
    server = HttpServer(with_lifespan(handler), **{"graceful_s": 5.0, **kwargs})
    await server.start([sock])
    try:
        yield server, port
    finally:
        await server.stop(graceful=False)


@contextlib.asynccontextmanager
async def connection(port: int, rcvbuf: int | None = None):
    sock = None
    if rcvbuf is not None:
        # A small receive window (set before connect) makes the server's writes back up.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        reader, writer = await asyncio.open_connection(sock=sock, limit=1 << 20)
    else:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        yield reader, writer
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def read_head(reader):
    raw = await reader.readuntil(b"\r\n\r\n")
    lines = raw.decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    return int(lines[0].split(" ")[1]), headers


async def read_chunked(reader) -> bytes:
    parts = []
    while True:
        size = int((await reader.readuntil(b"\r\n"))[:-2].split(b";")[0], 16)
        if size == 0:
            assert await reader.readexactly(2) == b"\r\n"
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        assert await reader.readexactly(2) == b"\r\n"


async def read_response(reader, head_only: bool = False):
    status, headers = await read_head(reader)
    if head_only:
        body = b""
    elif "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding") == "chunked":
        body = await read_chunked(reader)
    else:
        body = await reader.read()  # delimited by the connection's end
    return status, headers, body


async def at_eof(reader, timeout: float = 2.0) -> bool:
    return await asyncio.wait_for(reader.read(), timeout) == b""


async def respond(send, body: bytes, status: int = 200, headers=()) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-length", b"%d" % len(body)), *headers]})
    await send({"type": "http.response.body", "body": body})


async def read_body(receive) -> tuple[bytes, int]:
    parts, messages = [], 0
    while True:
        message = await receive()
        assert message["type"] == "http.request"
        parts.append(message["body"])
        messages += 1
        if not message.get("more_body"):
            return b"".join(parts), messages


async def echo(scope, receive, send):
    body, _ = await read_body(receive)
    await respond(send, scope["method"].encode() + b" " + scope["path"].encode() + b" " + body)


# -- keep-alive, pipelining, request bodies --------------------------------------------------

async def test_keep_alive_serves_two_requests_on_one_connection():
    ports = []

    async def app(scope, receive, send):
        ports.append(scope["client"][1])
        await echo(scope, receive, send)

    async with serve(app) as (server, port), connection(port) as (reader, writer):
        for path in (b"/one", b"/two"):
            writer.write(b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path)
            status, headers, body = await read_response(reader)
            assert (status, body) == (200, b"GET " + path + b" ")
            assert headers["content-length"] == str(len(body)) and "connection" not in headers
        assert len(ports) == 2 and ports[0] == ports[1]
        assert len(server.state.connections) == 1


async def test_pipelined_requests_are_answered_in_order():
    async def app(scope, receive, send):
        if scope["path"] == "/slow":  # would finish last if requests ran out of order
            await asyncio.sleep(0.1)
        await echo(scope, receive, send)

    async with serve(app) as (_, port), connection(port) as (reader, writer):
        writer.write(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"
                     b"POST /fast HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
                     b"GET /last HTTP/1.1\r\nHost: x\r\n\r\n")
        bodies = [(await read_response(reader))[2] for _ in range(3)]
        assert bodies == [b"GET /slow ", b"POST /fast abc", b"GET /last "]


async def test_content_length_body_sent_in_pieces_arrives_whole():
    async with serve(echo) as (_, port), connection(port) as (reader, writer):
        writer.write(b"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello")
        await asyncio.sleep(0.05)
        writer.write(b" world")
        status, _, body = await read_response(reader)
        assert (status, body) == (200, b"POST /up hello world")


async def test_chunked_request_body_is_decoded():
    async with serve(echo) as (_, port), connection(port) as (reader, writer):
        writer.write(b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nWiki\r\n")
        await asyncio.sleep(0.05)
        writer.write(b"5;ext=1\r\npedia\r\n0\r\n\r\n")
        status, _, body = await read_response(reader)
        assert (status, body) == (200, b"POST /c Wikipedia")


async def test_large_upload_survives_read_pausing():
    payload = bytes(range(256)) * 4096  # 1 MiB
    seen = {}

    async def app(scope, receive, send):
        await asyncio.sleep(0.2)  # let the server buffer past HIGH_WATER while we do not read
        seen["paused"] = receive.__self__.conn.read_paused
        body, seen["messages"] = await read_body(receive)
        await respond(send, hashlib.sha256(body).hexdigest().encode() + b" %d" % len(body))

    async with serve(app) as (_, port), connection(port) as (reader, writer):
        writer.write(b"PUT /big HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(payload))
        for i in range(0, len(payload), 65536):
            writer.write(payload[i:i + 65536])
            await writer.drain()
        _, _, body = await asyncio.wait_for(read_response(reader), 10)
    assert body == hashlib.sha256(payload).hexdigest().encode() + b" %d" % len(payload)
    assert seen["paused"] and seen["messages"] > 1


# -- Expect: 100-continue ---------------------------------------------------------------------

async def test_100_continue_is_sent_only_when_the_app_reads():
    go = asyncio.Event()

    async def app(scope, receive, send):
        await go.wait()
        await echo(scope, receive, send)

    async with serve(app) as (_, port), connection(port) as (reader, writer):
        writer.write(b"POST /e HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(reader.read(1), 0.2)  # the app has not asked for the body yet
        go.set()
        assert await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 2) == b"HTTP/1.1 100 Continue\r\n\r\n"
        writer.write(b"ping")
        status, _, body = await read_response(reader)
        assert (status, body) == (200, b"POST /e ping")
        writer.write(b"GET /again HTTP/1.1\r\nHost: x\r\n\r\n")  # still a keep-alive connection
        assert (await read_response(reader))[2] == b"GET /again "


async def test_answer_without_reading_skips_100_and_closes():
    async def app(scope, receive, send):
        await respond(send, b"too big", status=413)

    async with serve(app) as (_, port), connection(port) as (reader, writer):
        writer.write(b"POST /e HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 9999\r\n\r\n")
        raw = await asyncio.wait_for(reader.read(), 2)  # read() to EOF: the server must close
    assert raw.startswith(b"HTTP/1.1 413 ") and b"100 Continue" not in raw
    assert raw.endswith(b"\r\n\r\ntoo big")
    # The body was never read, so the connection cannot be reused: the response must say so.
    assert b"\r\nconnection: close\r\n" in raw.lower()


# -- response framing -------------------------------------------------------------------------

async def streamer(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    for piece in (b"hello", b"", b" streaming"):  # an empty piece must not end the stream early
        await send({"type": "http.response.body", "body": piece, "more_body": True})
    await send({"type": "http.response.body", "body": b"!"})


async def test_streaming_response_is_chunked_on_http11():
    async with serve(streamer) as (_, port), connection(port) as (reader, writer):
        for _ in range(2):
            writer.write(b"GET /s HTTP/1.1\r\nHost: x\r\n\r\n")
            status, headers = await read_head(reader)
            assert headers["transfer-encoding"] == "chunked" and "content-length" not in headers
            expected = b"5\r\nhello\r\na\r\n streaming\r\n1\r\n!\r\n0\r\n\r\n"
            assert await reader.readexactly(len(expected)) == expected


@pytest.mark.parametrize("extra", [b"", b"Connection: keep-alive\r\n"])
async def test_streaming_response_on_http10_ends_with_the_connection(extra):
    async with serve(streamer) as (_, port), connection(port) as (reader, writer):
        writer.write(b"GET /s HTTP/1.0\r\nHost: x\r\n" + extra + b"\r\n")
        status, headers, body = await asyncio.wait_for(read_response(reader), 2)
    assert "transfer-encoding" not in headers and "content-length" not in headers
    assert (status, body) == (200, b"hello streaming!")


async def test_head_response_has_length_but_no_body():
    async def app(scope, receive, send):
        await respond(send, b"eleven byte")

    async with serve(app) as (_, port), connection(port) as (reader, writer):
        writer.write(b"HEAD /h HTTP/1.1\r\nHost: x\r\n\r\nGET /g HTTP/1.1\r\nHost: x\r\n\r\n")
        status, headers, _ = await read_response(reader, head_only=True)
        assert (status, headers["content-length"]) == (200, "11")
        # Had the HEAD body leaked onto the wire, this would not parse as the next response.
        status, _, body = await read_response(reader)
        assert (status, body) == (200, b"eleven byte")


# -- errors -----------------------------------------------------------------------------------

async def test_malformed_request_gets_400_and_close():
    async with serve(echo) as (_, port), connection(port) as (reader, writer):
        writer.write(b"NOT A REQUEST\x00\r\n\r\n")
        status, headers, _ = await asyncio.wait_for(read_response(reader), 2)
        assert status == 400 and headers["connection"] == "close"
        assert await at_eof(reader)


async def test_app_error_before_start_is_a_bare_500():
    async def app(scope, receive, send):
        raise ValueError("secret-detail-42")

    async with serve(app) as (_, port), connection(port) as (reader, writer):
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        status, headers, body = await asyncio.wait_for(read_response(reader), 2)
        assert status == 500 and headers["connection"] == "close"
        assert b"secret-detail-42" not in body and b"Traceback" not in body
        assert await at_eof(reader)


async def test_app_error_mid_stream_cuts_the_connection():
    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"partial", "more_body": True})
        raise ValueError("boom")

    async with serve(app) as (_, port), connection(port) as (reader, writer):
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        status, headers = await read_head(reader)
        raw = await asyncio.wait_for(reader.read(), 2)
    # The client must see a truncated chunked body, never a terminating chunk or a 500.
    assert status == 200 and headers["transfer-encoding"] == "chunked"
    assert raw == b"7\r\npartial\r\n"


async def test_app_returning_without_response_is_500():
    async def app(scope, receive, send):
        return None

    async with serve(app) as (_, port), connection(port) as (reader, writer):
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        status, _, _ = await asyncio.wait_for(read_response(reader), 2)
        assert status == 500 and await at_eof(reader)


async def test_header_with_line_break_is_never_written():
    errors = []

    async def app(scope, receive, send):
        try:
            await respond(send, b"x", headers=[(b"x-evil", b"a\r\nset-cookie: pwned=1")])
        except RuntimeError as exc:
            errors.append(exc)
            raise

    async with serve(app) as (_, port), connection(port) as (reader, writer):
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        raw = await asyncio.wait_for(reader.read(), 2)
    assert errors and b"pwned" not in raw and b"x-evil" not in raw
    assert raw == b"" or raw.startswith(b"HTTP/1.1 500 ")


# -- disconnects, idle sweep, shutdown --------------------------------------------------------

async def test_client_disconnect_calls_hook_and_receive_reports_it():
    ready, hooked, done = asyncio.Event(), asyncio.Event(), asyncio.Event()
    seen = {}

    async def app(scope, receive, send):
        await read_body(receive)
        receive.__self__.on_disconnect = hooked.set
        ready.set()
        try:
            await asyncio.wait_for(hooked.wait(), 3)  # an upstream call stands in here
            seen["later"] = await receive()
        finally:
            done.set()

    async with serve(app) as (_, port):
        async with connection(port) as (_, writer):
            writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
            await asyncio.wait_for(ready.wait(), 2)
        await asyncio.wait_for(done.wait(), 3)
    assert hooked.is_set() and seen["later"] == {"type": "http.disconnect"}


async def test_pending_receive_wakes_on_disconnect():
    ready, got = asyncio.Event(), asyncio.Future()

    async def app(scope, receive, send):
        await read_body(receive)
        ready.set()
        got.set_result(await receive())

    async with serve(app) as (_, port):
        async with connection(port) as (_, writer):
            writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            await asyncio.wait_for(ready.wait(), 2)
        assert await asyncio.wait_for(got, 3) == {"type": "http.disconnect"}


async def test_idle_and_half_open_connections_are_swept_but_busy_ones_are_not():
    async def app(scope, receive, send):
        await asyncio.sleep(1.3)  # outlasts keep-alive and one sweep
        await respond(send, b"slow but fine")

    async with serve(app, keep_alive_s=0.3) as (_, port):
        async with connection(port) as (idle, _), connection(port) as (half, half_w), \
                connection(port) as (busy, busy_w):
            half_w.write(b"GET / HTTP/1.1\r\nHost:")
            busy_w.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            started = time.monotonic()
            assert await at_eof(idle, 2.0) and await at_eof(half, 2.0)
            assert 0.3 <= time.monotonic() - started < 1.8
            status, _, body = await asyncio.wait_for(read_response(busy), 2)
            assert (status, body) == (200, b"slow but fine")


async def test_graceful_stop_finishes_in_flight_requests_and_refuses_new_ones():
    entered = asyncio.Event()

    async def app(scope, receive, send):
        entered.set()
        await asyncio.sleep(0.2)
        await respond(send, b"finished")

    async with serve(app) as (server, port), connection(port) as (reader, writer), \
            connection(port) as (idle, _):
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        await asyncio.wait_for(entered.wait(), 2)
        stopping = asyncio.ensure_future(server.stop(graceful=True))
        await asyncio.sleep(0.05)
        assert not stopping.done()
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", port)
        assert await at_eof(idle, 1.0)  # idle keep-alive connections go at once
        status, headers, body = await asyncio.wait_for(read_response(reader), 2)
        assert (status, body, headers["connection"]) == (200, b"finished", "close")
        assert await at_eof(reader)
        await asyncio.wait_for(stopping, 2)


@pytest.mark.parametrize("failure", ["message", "exception"])
async def test_startup_failure_raises(failure):
    async def app(scope, receive, send):
        assert scope["type"] == "lifespan"
        await receive()
        if failure == "exception":
            raise RuntimeError("no database")
        await send({"type": "lifespan.startup.failed", "message": "no database"})

    sock = listening_socket()
    server = HttpServer(app)
    try:
        with pytest.raises(StartupFailed, match="no database"):
            await asyncio.wait_for(server.start([sock]), 2)
    finally:
        await server.stop(graceful=False)
        sock.close()


# -- write flow control -----------------------------------------------------------------------

async def slow_chunked_digest(reader):
    digest, total = hashlib.sha256(), 0
    while True:
        size = int((await reader.readuntil(b"\r\n"))[:-2], 16)
        data = await reader.readexactly(size + 2)
        if size == 0:
            return digest, total
        digest.update(data[:-2])
        total += size
        await asyncio.sleep(0.001)  # still slower than the server can write


async def test_slow_reader_gets_a_large_stream_complete():
    piece = hashlib.sha256(b"seed").digest() * 8192  # 256 KiB
    count = 48  # 12 MiB: far more than the kernel buffers hold
    pauses = []

    async def app(scope, receive, send):
        conn = receive.__self__.conn
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for _ in range(count):
            pauses.append(conn.write_paused)
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    async with serve(app) as (_, port), connection(port, rcvbuf=32768) as (reader, writer):
        writer.write(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        await asyncio.sleep(0.3)  # not reading yet: the server's writes must back up
        status, headers = await read_head(reader)
        digest, total = await asyncio.wait_for(slow_chunked_digest(reader), 30)
    assert (status, total) == (200, len(piece) * count)
    assert digest.digest() == hashlib.sha256(piece * count).digest()
    assert any(pauses), "the write pause path was never exercised"


async def test_works_with_a_real_client_library():
    async with serve(echo) as (_, port), httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
        for i in range(3):
            resp = await client.post("/p%20q", content=b"x" * i, params={"a": "1"})
            assert (resp.status_code, resp.content) == (200, b"POST /p q " + b"x" * i)
