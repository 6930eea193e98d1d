"""Protocol edges a real network finds: early answers to a client still uploading, and
request-head limits that hold however the bytes arrive."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest

from tests.http.helpers import connection, serve
from tests.http.test_server import assert_envelope, echo, read_response, respond
from tests.support import base_config, gateway_in_process


def upload_while_reading(port: int, head: bytes, body_size: int, chunk: int = 65536,
                         pause_after: int = 262144) -> tuple[bytes, str | None]:
    """A client that keeps sending its body while the server answers: it reads whatever
    comes once it is done sending (or the server stopped taking bytes). Returns what it
    read and the error it met, if any."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(5)
    error = None
    try:
        sock.sendall(head)
        sent = 0
        while sent < body_size:
            sock.sendall(b"x" * chunk)
            sent += chunk
            if sent == pause_after:
                time.sleep(0.2)   # the server answers and decides what to do meanwhile
    except OSError as exc:
        error = type(exc).__name__
    data = b""
    try:
        while True:
            got = sock.recv(65536)
            if not got:
                break
            data += got
    except OSError as exc:
        error = error or type(exc).__name__
    sock.close()
    return data, error


async def test_an_early_413_reaches_a_client_that_is_still_uploading():
    """Answered before the body is read (the declared length is over the cap), the server
    used to close at once with the client's bytes unread: the kernel then resets the
    connection, and the client loses the answer. It now half-closes after the answer and
    reads and drops the rest (RFC 9112 section 9.6)."""
    async def app(scope, receive, send):
        await respond(send, b"too big", status=413)

    async with serve(app) as (_, port):
        head = b"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 3000000\r\n\r\n"
        data, error = await asyncio.to_thread(upload_while_reading, port, head, 3_000_000)
    assert data.startswith(b"HTTP/1.1 413 ") and data.endswith(b"too big"), (data[:80], error)
    assert b"connection: close" in data.lower()
    assert error is None   # no reset: the upload ran to its end, then the answer was read


async def test_the_gateway_answers_413_to_an_oversized_upload_that_keeps_coming(mock, tmp_path):
    from tests.support import mock_backend  # noqa: F401 - the fixture's module

    async with gateway_in_process(base_config(mock.url)) as gw:
        port = int(gw.url.rsplit(":", 1)[1])
        head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
                b"authorization: Bearer " + gw.key.encode() + b"\r\nContent-Length: 5000000\r\n\r\n")
        data, error = await asyncio.to_thread(upload_while_reading, port, head, 5_000_000)
        assert data.startswith(b"HTTP/1.1 413 "), (data[:80], error)
        assert b'"code":"body_too_large"' in data and error is None
        assert await mock.requests() == 0
        async with gw.client() as client:   # the gateway still serves
            assert (await client.get(gw.url + "/healthz")).status_code == 200


async def test_lingering_is_bounded_in_time():
    """A client that neither stops sending nor closes is cut off after LINGER_S."""
    from tokenward.http import state

    async def app(scope, receive, send):
        await respond(send, b"no", status=413)

    async with serve(app) as (_, port), connection(port) as (reader, writer):
        writer.write(b"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n")
        status, _, _ = await asyncio.wait_for(read_response(reader), 2)
        assert status == 413
        started = time.monotonic()
        closed = False
        while time.monotonic() - started < state.LINGER_S + 2:
            try:
                writer.write(b"y" * 4096)
                await writer.drain()
            except (ConnectionError, OSError):
                closed = True
                break
            await asyncio.sleep(0.05)
        assert closed and time.monotonic() - started < state.LINGER_S + 1.5


def head_with(headers: int, value: bytes = b"v", path: bytes = b"/healthz") -> bytes:
    lines = b"".join(b"x-h%d: %s\r\n" % (i, value) for i in range(headers))
    return b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n" + lines + b"\r\n"


async def send_in(writer, data: bytes, pieces: int) -> None:
    size = max(1, len(data) // pieces)
    for i in range(0, len(data), size):
        writer.write(data[i:i + size])
        await writer.drain()
        await asyncio.sleep(0.001)


@pytest.mark.parametrize("path", [b"/healthz", b"/metrics", b"/admin/keys", b"/v1/chat/completions"])
@pytest.mark.parametrize("pieces", [1, 7, 300])
async def test_head_limits_hold_on_every_route_however_the_bytes_arrive(gw, path, pieces):
    """edge.max_headers (64) and edge.max_header_bytes (16 KiB) were checked by the edge
    stage, which the gateway's own routes never reach, and the server's own cap counted only
    reads that ended inside a head: one read carried any head past both."""
    port = int(gw.url.rsplit(":", 1)[1])
    cases = [(head_with(65, path=path), "more than 64 request headers"),
             (head_with(20, b"a" * 1000, path=path), "request headers exceed 16384 bytes")]
    for head, message in cases:
        async with connection(port) as (reader, writer):
            await send_in(writer, head, pieces)
            status, headers, body = await asyncio.wait_for(read_response(reader), 3)
            assert status == 431, (path, pieces, status, body[:200])
            assert_envelope(headers, body, "headers_too_large")
            assert message.encode() in body
    async with connection(port) as (reader, writer):   # a head at the limits passes
        await send_in(writer, head_with(63, path=b"/healthz"), pieces)
        status, _, _ = await asyncio.wait_for(read_response(reader), 3)
        assert status == 200


@pytest.fixture
async def gw(mock, tmp_path):
    async with gateway_in_process(base_config(mock.url)) as running:
        yield running


@pytest.fixture
async def mock():
    from tests.support import mock_backend

    async with mock_backend() as backend:
        yield backend
