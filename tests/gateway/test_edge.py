"""Edge refusals: each with its status and reason code, the backend untouched, and a control."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from tests.support import chat

LIMIT = 2048


async def _refused(mock, client, method, url, expect_status, expect_code, **kwargs):
    before = await mock.requests()
    resp = await client.request(method, url, **kwargs)
    assert resp.status_code == expect_status, resp.text
    assert resp.json()["error"]["code"] == expect_code
    assert resp.headers["x-request-id"]
    assert await mock.requests() == before
    return resp


async def _control(mock, client, url, body=None):
    before = await mock.requests()
    resp = await client.post(url + "/v1/chat/completions", json=body or chat())
    assert resp.status_code == 200, resp.text
    assert await mock.requests() == before + 1


@pytest.mark.parametrize("method,path,status,code", [
    ("POST", "/v1/foo", 404, "route_denied"),
    ("GET", "/v1/chat/completions", 405, "method_not_allowed"),
    ("POST", "/v1/models", 405, "method_not_allowed"),
    # everything vLLM exposes beyond the allowed routes
    ("POST", "/tokenize", 404, "route_denied"),
    ("POST", "/detokenize", 404, "route_denied"),
    ("POST", "/v1/audio/transcriptions", 404, "route_denied"),
    ("POST", "/pooling", 404, "route_denied"),
    # /v1/responses is served (issue 29, tests/dialects): POST only; vLLM's stored-response
    # routes beyond it are not
    ("GET", "/v1/responses", 405, "method_not_allowed"),
    ("GET", "/v1/responses/resp_1", 404, "route_denied"),
    ("GET", "/v1/chat/completions/render", 404, "route_denied"),
    ("POST", "/start_profile", 404, "route_denied"),
    ("GET", "/metrics", 404, "route_denied"),
    ("POST", "/v1/chat/completions/", 404, "route_denied"),
])
async def test_route_and_method_allowlist(gw, mock, method, path, status, code):
    async with gw.client() as client:
        await _refused(mock, client, method, gw.url + path, status, code,
                       content=orjson.dumps(chat()), headers={"content-type": "application/json"})
        await _control(mock, client, gw.url)


async def test_method_not_allowed_names_the_allowed_methods(gw, mock):
    async with gw.client() as client:
        resp = await _refused(mock, client, "DELETE", gw.url + "/v1/chat/completions", 405, "method_not_allowed")
        assert resp.headers["allow"] == "POST"


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x"])
async def test_content_type_allowlist(gw, mock, content_type):
    headers = {"content-type": content_type} if content_type else {}
    async with gw.client() as client:
        await _refused(mock, client, "POST", gw.url + "/v1/chat/completions", 415, "unsupported_media_type",
                       content=orjson.dumps(chat()), headers=headers)
        # parameters on an allowed type are fine
        before = await mock.requests()
        resp = await client.post(gw.url + "/v1/chat/completions", content=orjson.dumps(chat()),
                                 headers={"content-type": "application/json; charset=utf-8"})
        assert resp.status_code == 200 and await mock.requests() == before + 1


def _body_of_size(size: int) -> bytes:
    base = orjson.dumps(chat(content=""))
    pad = size - len(base)
    body = orjson.dumps(chat(content="a" * pad))
    assert len(body) == size
    return body


@pytest.fixture
async def small_gw(make_gateway):
    async with make_gateway(f"edge: {{max_body_bytes: {LIMIT}}}\n") as running:
        yield running


async def test_body_cap_exact_at_limit_and_one_over(small_gw, mock):
    url = small_gw.url + "/v1/chat/completions"
    async with small_gw.client() as client:
        at_limit = _body_of_size(LIMIT)
        before = await mock.requests()
        resp = await client.post(url, content=at_limit, headers={"content-type": "application/json"})
        assert resp.status_code == 200, resp.text
        assert await mock.requests() == before + 1
        await _refused(mock, client, "POST", url, 413, "body_too_large",
                       content=_body_of_size(LIMIT + 1), headers={"content-type": "application/json"})


async def _chunked(parts):
    for part in parts:
        yield part


async def test_body_cap_applies_to_chunked_bodies(small_gw, mock):
    url = small_gw.url + "/v1/chat/completions"
    async with small_gw.client() as client:
        body = _body_of_size(LIMIT)
        resp = await client.post(url, content=_chunked([body[:100], body[100:]]),
                                 headers={"content-type": "application/json"})
        assert resp.status_code == 200, resp.text
        over = _body_of_size(LIMIT + 1)
        await _refused(mock, client, "POST", url, 413, "body_too_large",
                       content=_chunked([over[:1000], over[1000:]]), headers={"content-type": "application/json"})


async def test_oversized_chunked_body_is_refused_before_it_is_all_sent(small_gw, mock):
    """The gateway answers 413 while the client is still sending: it never buffers the rest.
    (The body of a caller without credentials is not read at all: 401 on the head.)"""
    host, port = small_gw.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                 b"authorization: Bearer " + small_gw.key.encode() + b"\r\n"
                 b"transfer-encoding: chunked\r\n\r\n")
    chunk = b"a" * 1500
    for _ in range(2):
        writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert head.startswith(b"HTTP/1.1 413")
    writer.close()
    assert await mock.requests() == 0


async def test_declared_length_over_cap_refused_without_reading(small_gw, mock):
    host, port = small_gw.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                 b"content-length: 100000000\r\n\r\n")
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert head.startswith(b"HTTP/1.1 413")
    writer.close()
    assert await mock.requests() == 0


async def test_header_limits(make_gateway, mock):
    async with make_gateway("edge: {max_headers: 20, max_header_bytes: 2048}\n") as running:
        url = running.url + "/v1/chat/completions"
        async with running.client() as client:
            many = {f"x-h{i}": "v" for i in range(30)}
            await _refused(mock, client, "POST", url, 431, "headers_too_large", json=chat(), headers=many)
            await _refused(mock, client, "POST", url, 431, "headers_too_large", json=chat(),
                           headers={"x-big": "v" * 3000})
            await _control(mock, client, running.url)


FRAMING_REFUSALS = {
    "content-length and chunked": (400, "malformed_request",
                                   b"content-length: 5\r\ntransfer-encoding: chunked\r\n\r\n"),
    "two content-lengths": (400, "malformed_request", b"content-length: 5\r\ncontent-length: 6\r\n\r\n"),
    "gzip, chunked": (501, "transfer_encoding_unsupported", b"transfer-encoding: gzip, chunked\r\n\r\n"),
    "unknown coding": (501, "transfer_encoding_unsupported", b"transfer-encoding: xchunked\r\n\r\n"),
}


@pytest.mark.parametrize("status,code,framing", FRAMING_REFUSALS.values(), ids=FRAMING_REFUSALS.keys())
async def test_ambiguous_body_framing_never_reaches_the_backend(gw, mock, status, code, framing):
    """Framing a proxy and a backend could read two ways is refused by the gateway's server
    itself, in the usual envelope; a chat request framed plainly passes beside it."""
    body = orjson.dumps(chat())
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    host, port = gw.url.removeprefix("http://").split(":")
    before = await mock.requests()
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                 + framing + chunked)
    raw = await asyncio.wait_for(reader.read(), 5)   # answered, then closed
    writer.close()
    head, _, answer = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 %d " % status) and b"\r\nx-request-id: req_srv_" in head
    assert orjson.loads(answer)["error"]["code"] == code
    assert await mock.requests() == before
    async with gw.client() as client:
        await _control(mock, client, gw.url)
