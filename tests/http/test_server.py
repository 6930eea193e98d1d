"""The gateway's own HTTP/1.1 server (server.py, serving.py) over real loopback sockets.

Most checks use raw sockets because framing (chunked vs length, 100 Continue, when the
connection ends) is exactly what an HTTP client library would hide.
"""

from __future__ import annotations

import asyncio
import hashlib
import json

import pytest

from tests.http.helpers import serve, connection, read_head, read_response, at_eof, respond, read_body, echo


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


async def test_body_now_hands_over_a_whole_body_once_and_only_when_it_has_all_arrived():
    """RequestCycle.body_now (the pipeline reads a body that came with the head without a
    coroutine): the same bytes receive() would give, once; None while more is to come, and
    then receive() still delivers the body."""
    seen = []

    async def app(scope, receive, send):
        cycle = receive.__self__
        first = cycle.body_now()
        if first is None:   # not all here yet: receive() waits for it, as before
            parts = []
            while True:
                message = await receive()
                parts.append(message.get("body", b""))
                if not message.get("more_body"):
                    break
            body = b"".join(parts)
        else:
            body = first
        seen.append((first, body, cycle.body_now()))
        await respond(send, body)

    async with serve(app) as (_, port), connection(port) as (reader, writer):
        writer.write(b"POST /whole HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
        assert (await read_response(reader))[2] == b"hello"
        writer.write(b"POST /pieces HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello")
        await asyncio.sleep(0.05)
        writer.write(b" world")
        assert (await read_response(reader))[2] == b"hello world"
        writer.write(b"POST /empty HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        assert (await read_response(reader))[0] == 200
    # whole: taken at once, and not twice; in pieces: None first, receive() had it all; empty: b""
    assert seen == [(b"hello", b"hello", None), (None, b"hello world", None), (b"", b"", None)]


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

def assert_envelope(headers: dict, body: bytes, code: str) -> None:
    """The server's own refusals look like every other refusal: OpenAI's envelope, an id."""
    assert headers["content-type"] == "application/json" and headers["x-request-id"].startswith("req_srv_")
    error = json.loads(body)["error"]
    assert error["code"] == code and error["message"] and "Traceback" not in error["message"]
    assert headers["x-tokenward-reason"] == code


async def test_malformed_request_gets_400_and_close():
    async with serve(echo) as (_, port), connection(port) as (reader, writer):
        writer.write(b"NOT A REQUEST\x00\r\n\r\n")
        status, headers, body = await asyncio.wait_for(read_response(reader), 2)
        assert status == 400 and headers["connection"] == "close"
        assert_envelope(headers, body, "malformed_request")
        assert await at_eof(reader)


SMUGGLING = {
    "content-length and chunked": b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "two content-lengths": b"Content-Length: 5\r\nContent-Length: 10\r\n\r\nhelloworld",
    "a folded header line": b"Content-Length: 5\r\n X-Folded: yes\r\n\r\nhello",
    "space before the colon": b"Content-Length : 5\r\n\r\nhello",
    "a signed content-length": b"Content-Length: +5\r\n\r\nhello",
    "a chunk size that overflows": b"Transfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\nhello",
}


@pytest.mark.parametrize("framing", SMUGGLING.values(), ids=SMUGGLING.keys())
async def test_ambiguous_framing_is_refused_with_400_and_never_reaches_the_app_whole(framing):
    # What a proxy in front and a backend behind could read two ways (request smuggling) is
    # refused: the app never gets a body to act on, and the connection is closed. A control
    # request with the same body and plain framing gets through on the same server.
    bodies = []

    async def app(scope, receive, send):
        parts = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the connection ended before the body did
            parts.append(message["body"])
            if not message.get("more_body"):
                break
        bodies.append(b"".join(parts))
        await respond(send, scope["method"].encode() + b" " + scope["path"].encode() + b" " + bodies[-1])

    async with serve(app) as (_, port):
        async with connection(port) as (reader, writer):
            writer.write(b"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
            status, _, body = await asyncio.wait_for(read_response(reader), 2)
            assert (status, body) == (200, b"POST /up hello")
        async with connection(port) as (reader, writer):
            writer.write(b"POST /up HTTP/1.1\r\nHost: x\r\n" + framing)
            status, headers, body = await asyncio.wait_for(read_response(reader), 2)
            assert status == 400 and headers["connection"] == "close"
            assert_envelope(headers, body, "malformed_request")
            assert await at_eof(reader)
    assert bodies == [b"hello"]


async def test_a_malformed_body_while_the_app_is_busy_gets_one_answer_and_the_app_sees_a_disconnect(caplog):
    # The app answers on the body's first chunk (as the gateway refuses on what it has read)
    # in the same loop pass in which the rest turns out malformed: the client gets the 400,
    # and the app's answer goes nowhere rather than failing as a second response.
    seen = []

    async def app(scope, receive, send):
        seen.append((await receive())["type"])   # woken by the read that also holds the bad chunk
        await respond(send, b"late answer")
        seen.append((await receive())["type"])

    async with serve(app) as (_, port), connection(port) as (reader, writer):
        writer.write(b"POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                     b"5\r\nhello\r\nffffffffffffffffff\r\n")
        raw = await asyncio.wait_for(reader.read(), 2)
        await asyncio.sleep(0.2)
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ") and raw.count(b"HTTP/1.1") == 1
    assert json.loads(body)["error"]["code"] == "malformed_request"
    assert seen[-1] == "http.disconnect"   # the rest of the body never comes
    assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.text


async def test_transfer_encoding_in_an_http10_request_is_refused_before_the_app_runs():
    calls = []

    async def app(scope, receive, send):
        calls.append(scope["path"])
        await echo(scope, receive, send)

    async with serve(app) as (_, port), connection(port) as (reader, writer):
        writer.write(b"POST /up HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
        status, headers, body = await asyncio.wait_for(read_response(reader), 2)
        assert status == 400
        assert_envelope(headers, body, "malformed_request")
        assert await at_eof(reader)
    assert calls == []


@pytest.mark.parametrize("coding", [b"gzip, chunked", b"xchunked", b"identity"])
async def test_a_transfer_coding_other_than_chunked_gets_501_before_the_app_runs(coding):
    calls = []

    async def app(scope, receive, send):
        calls.append(scope["path"])
        await echo(scope, receive, send)

    async with serve(app) as (_, port), connection(port) as (reader, writer):
        writer.write(b"POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: " + coding + b"\r\n\r\n"
                     b"5\r\nhello\r\n0\r\n\r\n")
        status, headers, body = await asyncio.wait_for(read_response(reader), 2)
        assert status == 501 and headers["connection"] == "close"
        assert_envelope(headers, body, "transfer_encoding_unsupported")
        assert await at_eof(reader)
    assert calls == []


async def test_bytes_after_a_malformed_request_get_no_second_answer():
    async with serve(echo) as (_, port), connection(port) as (reader, writer):
        writer.write(b"NOT A REQUEST\x00\r\n\r\n")
        await writer.drain()
        writer.write(b"MORE GARBAGE\x00\r\n\r\n" * 50)
        raw = await asyncio.wait_for(reader.read(), 2)  # to the close
    assert raw.startswith(b"HTTP/1.1 400 ") and raw.count(b"HTTP/1.1") == 1


async def test_requests_read_whole_before_unframeable_bytes_are_answered_then_the_connection_closes():
    # A body longer than its Content-Length leaves bytes that frame no request: the requests
    # before them are still answered in order (the last with "connection: close"), the
    # bytes themselves get no answer, and the app is never called for them.
    paths = []

    async def app(scope, receive, send):
        paths.append(scope["path"])
        await asyncio.sleep(0.05)   # still working when the bad bytes arrive
        await echo(scope, receive, send)

    async with serve(app) as (_, port), connection(port) as (reader, writer):
        writer.write(b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
                     b"GET /b HTTP/1.1\r\nHost: x\r\n\r\n"
                     b"NOT A REQUEST\x00\r\n\r\n")
        first = await asyncio.wait_for(read_response(reader), 2)
        second = await asyncio.wait_for(read_response(reader), 2)
        assert await at_eof(reader)
    assert (first[0], first[2]) == (200, b"POST /a abc") and "connection" not in first[1]
    assert (second[0], second[2]) == (200, b"GET /b ") and second[1]["connection"] == "close"
    assert paths == ["/a", "/b"]


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


@pytest.mark.parametrize("way", ["asgi", "send_bytes"])   # an app's messages; the gateway's own whole answers
@pytest.mark.parametrize("header", [
    (b"x-evil", b"a\r\nset-cookie: pwned=1"), (b"x-evil", b"pwned\r\n"), (b"x-evil", b"a\npwned"),
    (b"x-evil", b"a\rpwned"), (b"x-evil\r\npwned", b"1"), (b"x-evil", b"\r\n\r\npwned"),
    # a name the server writes without lower-casing it
    (b"x-request-id", b"a\r\nset-cookie: pwned=1"), (b"x-request-id", b"a\npwned"),
])
async def test_header_with_line_break_is_never_written(header, way):
    from tokenward.http.responses import JSON, send_bytes

    errors = []

    async def app(scope, receive, send):
        try:
            if way == "asgi":
                await respond(send, b"x", headers=[(b"x-fine", b"1"), header])
            else:   # the length goes last
                await send_bytes(send, 200, [JSON, header], b"{}")
        except RuntimeError as exc:
            errors.append(exc)
            raise

    async with serve(app) as (_, port), connection(port) as (reader, writer):
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        raw = await asyncio.wait_for(reader.read(), 2)
    assert errors and b"pwned" not in raw and b"x-evil" not in raw
    assert raw.startswith(b"HTTP/1.1 500 ")


@pytest.mark.parametrize("headers", [
    [(b"content-type", b"application/json"), (b"x-request-id", b"r1"), (b"x-ratelimit-limit-tokens", b"10")],
    [(b"x-custom", b"1"), (b"x-request-id", b"r1")],            # a name of the app's own
    [],
])
async def test_whole_answer_head_is_written_as_sent(headers):
    from tokenward.http.responses import send_bytes

    async def app(scope, receive, send):
        await send_bytes(send, 200, list(headers), b"hi")

    async with serve(app) as (_, port), connection(port) as (reader, writer):
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        raw = await asyncio.wait_for(reader.readuntil(b"\r\n\r\nhi"), 2)
    lines = b"".join(b"%s: %s\r\n" % header for header in headers)
    assert raw == b"HTTP/1.1 200 OK\r\n" + lines + b"content-length: 2\r\n\r\nhi"


async def test_app_error_after_start_but_before_any_byte_is_still_a_500():
    # The head goes out with the first body bytes, so nothing reached the client yet.
    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        raise ValueError("boom")

    async with serve(app) as (_, port), connection(port) as (reader, writer):
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        status, headers, _ = await asyncio.wait_for(read_response(reader), 2)
        assert status == 500 and headers["connection"] == "close"


async def test_no_body_is_written_after_a_204():
    async def app(scope, receive, send):
        await respond(send, b"stray", status=204) if scope["path"] == "/a" else await respond(send, b"ok")

    async with serve(app) as (_, port), connection(port) as (reader, writer):
        writer.write(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n")
        status, _ = await read_head(reader)
        assert status == 204
        # The next response follows the 204's head directly: no stray body bytes in between.
        status, _, body = await asyncio.wait_for(read_response(reader), 2)
        assert status == 200 and body == b"ok"


async def test_a_request_head_that_keeps_growing_is_refused_with_431():
    # httptools buffers a header line until it ends: without this cap one endless header
    # would grow without bound. A head under the cap on the same server gets through.
    async with serve(echo, max_head_bytes=4096) as (_, port):
        async with connection(port) as (reader, writer):
            writer.write(b"GET /ok HTTP/1.1\r\nHost: x\r\nX-Fine: " + b"a" * 2000 + b"\r\n\r\n")
            status, _, body = await asyncio.wait_for(read_response(reader), 2)
            assert (status, body) == (200, b"GET /ok ")
        async with connection(port) as (reader, writer):
            writer.write(b"GET /big HTTP/1.1\r\nHost: x\r\nX-Endless: ")
            for _ in range(40):  # 40 x 512 bytes, one header value that never ends
                writer.write(b"b" * 512)
                await writer.drain()
                await asyncio.sleep(0.005)
                if reader.at_eof() or reader._buffer:  # noqa: SLF001 - answered already
                    break
            status, headers, body = await asyncio.wait_for(read_response(reader), 2)
            assert status == 431 and headers["connection"] == "close"
            assert_envelope(headers, body, "headers_too_large")
            assert await at_eof(reader)
