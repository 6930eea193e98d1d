"""Clients that hold a connection without sending: a request head or body trickled, too
many connections from one address, and the strict head rules (one Host, one credential,
HTTP/1.x only). The server's own limits (http/limits.py), over real loopback sockets."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.http.helpers import at_eof, connection, echo, read_body, read_response, respond, serve
from tests.http.test_server import assert_envelope
from tokenward.http import serving
from tokenward.http.limits import ClientLimits

FAST = ClientLimits(head_timeout_s=1.0, body_timeout_s=1.5, min_body_rate=100, body_rate_grace_s=0.5)


@pytest.fixture(autouse=True)
def quick_sweep(monkeypatch):
    """The limits are checked by the server's sweep, once a second in service; here more often."""
    monkeypatch.setattr(serving, "SWEEP_S", 0.1)


async def trickle(writer, data: bytes, every: float) -> None:
    for i in range(len(data)):
        writer.write(data[i:i + 1])
        await writer.drain()
        await asyncio.sleep(every)


async def test_a_trickled_request_head_gets_408_at_the_head_deadline():
    async with serve(echo, limits=FAST) as (_, port), connection(port) as (reader, writer):
        started = time.monotonic()
        task = asyncio.ensure_future(trickle(writer, b"GET /x HTTP/1.1\r\nHost: x\r\nx-slow: " + b"a" * 100, 0.2))
        try:
            status, headers, body = await asyncio.wait_for(read_response(reader), 3)
        finally:
            task.cancel()
        assert status == 408 and 1.0 <= time.monotonic() - started < 2.0
        assert_envelope(headers, body, "request_timeout")


async def test_a_connection_that_says_nothing_is_closed_at_the_head_deadline():
    async with serve(echo, limits=FAST) as (_, port), connection(port) as (reader, _):
        started = time.monotonic()
        assert await at_eof(reader, 3)
        assert 1.0 <= time.monotonic() - started < 2.0


async def test_a_kept_alive_connection_keeps_its_idle_time_not_the_head_deadline():
    async with serve(echo, limits=FAST, keep_alive_s=30) as (_, port), connection(port) as (reader, writer):
        writer.write(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (await asyncio.wait_for(read_response(reader), 2))[0] == 200
        await asyncio.sleep(1.5)   # past the head deadline, idle between requests
        writer.write(b"GET /b HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (await asyncio.wait_for(read_response(reader), 2))[2] == b"GET /b "


@pytest.mark.parametrize("limits,every,words", [
    (FAST, 0.2, "slower than 100 bytes a second"),                         # 5 B/s against 100 B/s
    (ClientLimits(body_timeout_s=1.0, min_body_rate=0), 0.01, "within 1 s"),  # fast enough, too long
])
async def test_a_trickled_body_gets_408_and_the_app_sees_the_client_gone(limits, every, words):
    seen = []

    async def app(scope, receive, send):
        message = {"type": "http.request", "more_body": True}
        while message["type"] == "http.request" and message.get("more_body"):
            message = await receive()
        seen.append(message["type"])
        if message["type"] == "http.request":
            await respond(send, b"whole")

    async with serve(app, limits=limits) as (_, port), connection(port) as (reader, writer):
        writer.write(b"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
        started = time.monotonic()
        task = asyncio.ensure_future(trickle(writer, b"a" * 100000, every))
        try:
            status, headers, body = await asyncio.wait_for(read_response(reader), 4)
        finally:
            task.cancel()
        assert status == 408 and time.monotonic() - started < 2.5
        assert_envelope(headers, body, "request_timeout")
        assert words in body.decode()
        await asyncio.sleep(0.05)
        assert seen == ["http.disconnect"]


async def test_time_the_server_did_not_read_is_not_held_against_the_body():
    """Reading paused because the app is busy (back-pressure) stops the body's clock."""
    async def app(scope, receive, send):
        await asyncio.sleep(2.0)   # longer than the body deadline, before reading a byte
        body, _ = await read_body(receive)
        await respond(send, b"%d" % len(body))

    size = 4 * 1024 * 1024
    async with serve(app, limits=FAST) as (_, port), connection(port) as (reader, writer):
        writer.write(b"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % size + b"b" * (size - 10))
        await asyncio.sleep(2.3)   # the app reads now: the body's clock runs again
        await trickle(writer, b"b" * 10, 0.03)
        status, _, body = await asyncio.wait_for(read_response(reader), 6)
        assert (status, body) == (200, b"%d" % size)


async def test_connections_per_client_address_are_capped():
    async with serve(echo, limits=ClientLimits(max_connections_per_client=2)) as (_, port):
        async with connection(port) as (r1, w1), connection(port) as (r2, w2):
            async with connection(port) as (r3, w3):
                status, headers, body = await asyncio.wait_for(read_response(r3), 2)
                assert status == 503 and headers["retry-after"] == "1"
                assert_envelope(headers, body, "too_many_connections")
            for reader, writer in ((r1, w1), (r2, w2)):   # the two held are served
                writer.write(b"GET /held HTTP/1.1\r\nHost: x\r\n\r\n")
                assert (await asyncio.wait_for(read_response(reader), 2))[0] == 200
        await asyncio.sleep(0.1)
        async with connection(port) as (reader, writer):   # released on close
            writer.write(b"GET /again HTTP/1.1\r\nHost: x\r\n\r\n")
            assert (await asyncio.wait_for(read_response(reader), 2))[0] == 200


async def test_a_connection_draining_after_its_answer_leaves_its_place_to_another():
    """An early answer (a refusal before the body) lingers to drain the upload; meanwhile
    it counts against neither max_connections nor the per-client cap."""
    async def app(scope, receive, send):
        if scope["path"] == "/refuse":
            await respond(send, b"no", status=401)
        else:
            await echo(scope, receive, send)

    limits = ClientLimits(max_connections_per_client=1)
    async with serve(app, max_connections=1, limits=limits) as (_, port):
        async with connection(port) as (reader, writer):
            writer.write(b"POST /refuse HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\nab")
            status, headers, _ = await asyncio.wait_for(read_response(reader), 2)
            assert status == 401 and headers["connection"] == "close"
            writer.write(b"c" * 1000)   # still uploading: the connection lingers
            async with connection(port) as (r2, w2):
                w2.write(b"GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
                assert (await asyncio.wait_for(read_response(r2), 2))[0] == 200


FRAMING = {
    "two Host headers": (b"GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
    "two Authorization headers": (b"GET /x HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer a\r\n"
                                  b"authorization: Bearer b\r\n\r\n", 400),
    "two x-api-key headers": (b"GET /x HTTP/1.1\r\nHost: a\r\nx-api-key: a\r\nX-Api-Key: b\r\n\r\n", 400),
    "HTTP/1.1 without Host": (b"GET /x HTTP/1.1\r\nAuthorization: Bearer a\r\n\r\n", 400),
    "HTTP/2.0 in an HTTP/1 request line": (b"GET /x HTTP/2.0\r\nHost: a\r\n\r\n", 400),
    "HTTP/0.9": (b"GET /x\r\n\r\n", None),
    "HTTP/0.9 after a served request": (b"GET /ok HTTP/1.1\r\nHost: a\r\n\r\nGET /x\r\n\r\n", None),
}


@pytest.mark.parametrize("raw,status", FRAMING.values(), ids=FRAMING.keys())
async def test_heads_a_proxy_could_read_otherwise_never_reach_the_app(raw, status):
    paths = []

    async def app(scope, receive, send):
        paths.append(scope["path"])
        await echo(scope, receive, send)

    async with serve(app) as (_, port), connection(port) as (reader, writer):
        writer.write(raw)
        if raw.startswith(b"GET /ok"):
            assert (await asyncio.wait_for(read_response(reader), 2))[2] == b"GET /ok "
        if status is None:
            assert await asyncio.wait_for(reader.read(), 2) == b""   # closed, not answered
        else:
            got, headers, body = await asyncio.wait_for(read_response(reader), 2)
            assert got == status and headers["connection"] == "close"
            assert_envelope(headers, body, "malformed_request")
            assert await at_eof(reader)
        async with connection(port) as (r2, w2):   # the control: a plain request is served
            w2.write(b"GET /ok HTTP/1.0\r\n\r\n")
            assert (await asyncio.wait_for(read_response(r2), 2))[0] == 200
    assert "/x" not in paths
