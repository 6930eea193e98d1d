"""The server's connection lifecycle: disconnects, idle sweep, graceful stop, lifespan, flow control."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time

import httpx
import pytest

from tokenward.http.serving import HttpServer, StartupFailed
from tests.http.helpers import listening_socket, serve, connection, read_head, read_response, at_eof, respond, read_body, echo


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


async def test_a_body_that_stops_arriving_gets_408_and_the_app_sees_a_disconnect():
    seen = []

    async def app(scope, receive, send):
        while True:
            message = await receive()
            seen.append(message["type"])
            if message["type"] == "http.disconnect" or not message.get("more_body"):
                break
        await respond(send, b"never sent")  # after the disconnect: a no-op, not an error

    async with serve(app, keep_alive_s=0.3) as (_, port), connection(port) as (reader, writer):
        # A fast body on the same server is untouched by the sweep.
        writer.write(b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
        status, _, body = await asyncio.wait_for(read_response(reader), 2)
        assert (status, body) == (200, b"never sent")
        started = time.monotonic()
        writer.write(b"POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
        status, headers, body = await asyncio.wait_for(read_response(reader), 3)
        assert status == 408 and headers["connection"] == "close"
        assert json.loads(body)["error"]["code"] == "request_timeout"
        assert 0.3 <= time.monotonic() - started < 2.0
        assert await at_eof(reader)
    assert seen[-2:] == ["http.request", "http.disconnect"]


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


async def test_connections_past_the_cap_are_answered_503_at_once_and_a_freed_slot_is_reused():
    async with serve(echo, max_connections=2) as (server, port):
        async with connection(port) as (r1, w1), connection(port) as (r2, w2):
            for reader, writer in ((r1, w1), (r2, w2)):   # both held, and served
                writer.write(b"GET /held HTTP/1.1\r\nHost: x\r\n\r\n")
                assert (await asyncio.wait_for(read_response(reader), 2))[0] == 200
            async with connection(port) as (reader, writer):
                status, headers, body = await asyncio.wait_for(read_response(reader), 2)
                assert status == 503 and headers["retry-after"] == "1" and headers["connection"] == "close"
                assert json.loads(body)["error"]["code"] == "too_many_connections"
                assert await at_eof(reader)
            async with connection(port) as (reader, writer):   # each answer has its own request id
                second = await asyncio.wait_for(read_response(reader), 2)
            assert second[0] == 503 and second[1]["x-request-id"] != headers["x-request-id"]
            assert server.state.turned_away == 2
        for _ in range(100):   # the two closed: their slots come back
            if not server.state.connections:
                break
            await asyncio.sleep(0.01)
        async with connection(port) as (reader, writer):
            writer.write(b"GET /again HTTP/1.1\r\nHost: x\r\n\r\n")
            status, _, body = await asyncio.wait_for(read_response(reader), 2)
            assert (status, body) == (200, b"GET /again ")
