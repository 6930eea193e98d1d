"""Hostile clients on raw sockets against a real gateway over loopback (issue 27, points 3
and 5, and the request-smuggling cases that held before and had no test at this level):
strangers trickling bodies cannot hold the connections a keyed caller needs, a keyed
caller's trickled body is cut at the body deadline or minimum rate, and heads a proxy in
front could read otherwise are refused before the pipeline. Each refusal: status, reason
code in the body and in x-tokenward-reason, the mock backend's counter unmoved, and a
control request served beside it.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncIterator

import httpx
import orjson
import pytest

from tests.http.helpers import read_response
from tests.support import RunningGateway, base_config, chat, mock_backend, stop_app
from tokenward.app import Gateway
from tokenward.config import parse_config
from tokenward.http.limits import client_limits
from tokenward.http.serving import HttpServer
from tokenward.mock.server import bind_socket

BODY = orjson.dumps(chat())


@pytest.fixture
async def mock():
    async with mock_backend() as backend:
        yield backend


@contextlib.asynccontextmanager
async def gateway(mock, extra: str = "", max_connections: int | None = None) -> AsyncIterator[RunningGateway]:
    """The gateway under its own server, as ``tokenward serve`` runs it, with a connection cap."""
    app = Gateway(parse_config(base_config(mock.url, extra=extra), environ={}))
    sock = bind_socket("127.0.0.1", 0)
    sock.listen(2048)
    server = HttpServer(app, keep_alive_s=30.0, graceful_s=5.0, max_connections=max_connections,
                        limits=client_limits(app.config))
    await server.start([sock])
    running = RunningGateway(f"http://127.0.0.1:{sock.getsockname()[1]}", app, server)
    running.key = await running.new_key("acme")
    try:
        yield running
    finally:
        await stop_app(server)


def port_of(gw: RunningGateway) -> int:
    return int(gw.url.rsplit(":", 1)[1])


def chat_head(extra: bytes = b"", length: int = len(BODY)) -> bytes:
    return (b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            + extra + b"content-length: %d\r\n\r\n" % length)


def assert_refused(answer, status: int, code: str) -> None:
    got, headers, body = answer
    assert got == status, body
    assert orjson.loads(body)["error"]["code"] == code
    assert headers["x-tokenward-reason"] == code


async def control(gw: RunningGateway, mock) -> None:
    """A keyed chat request on a new connection reaches the backend, once."""
    before = await mock.requests()
    async with gw.client() as client:
        resp = await client.post(gw.url + "/v1/chat/completions", json=chat())
    assert resp.status_code == 200, resp.text
    assert await mock.requests() == before + 1


async def answer_or_close(reader, timeout: float):
    """(status, headers, body) of the first answer, None if the connection closed without
    one, "waiting" if nothing came within ``timeout``."""
    try:
        return await asyncio.wait_for(read_response(reader), timeout)
    except asyncio.IncompleteReadError as exc:
        return None if not exc.partial else "partial"
    except TimeoutError:
        return "waiting"


async def trickle(writer, every: float, size: int = 1) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while True:
            await asyncio.sleep(every)
            writer.write(b" " * size)
            await writer.drain()


# -- point 3: strangers cannot hold the connections ---------------------------------------

@pytest.mark.parametrize("credential,code", [(b"", "missing_credentials"),
                                             (b"authorization: Bearer tw_0000000000000000_nope\r\n",
                                              "invalid_credentials")])
async def test_strangers_trickling_bodies_do_not_keep_a_keyed_caller_out(mock, credential, code):
    """20 connections without valid credentials, each trickling its body a byte every 3 s,
    against max_connections: 20. Before: every keyed request got 503 too_many_connections
    for as long as they lasted. Now each is answered 401 on its head and drained within
    the linger bounds, and a keyed request is served within 1 s."""
    async with gateway(mock, max_connections=20) as gw:
        before = await mock.requests()
        slow = [await asyncio.open_connection("127.0.0.1", port_of(gw)) for _ in range(20)]
        loop = asyncio.get_running_loop()
        started = loop.time()
        for _, writer in slow:
            writer.write(chat_head(credential, length=1000) + b"{")
        tasks = [asyncio.ensure_future(trickle(writer, 3.0)) for _, writer in slow]
        try:
            answers = await asyncio.gather(*(answer_or_close(reader, 0.8) for reader, _ in slow))
            async with httpx.AsyncClient(headers=gw.auth, timeout=2) as client:
                resp = await client.post(gw.url + "/v1/chat/completions", json=chat())
            assert resp.status_code == 200, resp.text
            assert loop.time() - started < 1.0
            for answer in answers:
                assert answer is None or answer != "waiting" and answer != "partial", answer
                if answer is not None:
                    assert_refused(answer, 401, code)
                    assert answer[1]["connection"] == "close"
            # drained, then closed, within the linger bounds (http/state.py LINGER_S)
            closed = await asyncio.gather(*(answer_or_close(reader, 3.0) for reader, _ in slow))
            assert all(c is None for c in closed), closed
        finally:
            for task in tasks:
                task.cancel()
            for _, writer in slow:
                writer.close()
        assert await mock.requests() == before + 1


@pytest.mark.parametrize("limits,every,size,words", [
    ("{min_body_rate: 200, body_rate_grace_s: 1}", 0.3, 1, "slower than 200 bytes a second"),
    ("{body_timeout_s: 2, min_body_rate: 0}", 0.05, 10, "did not arrive within 2 s"),
], ids=["minimum rate", "whole-body deadline"])
async def test_a_keyed_callers_trickled_body_is_cut_with_a_clear_refusal(mock, limits, every, size, words):
    async with gateway(mock, extra=f"server: {limits}\n") as gw:
        before = await mock.requests()
        reader, writer = await asyncio.open_connection("127.0.0.1", port_of(gw))
        writer.write(chat_head(b"authorization: Bearer " + gw.key.encode() + b"\r\n", length=100_000) + b"{")
        task = asyncio.ensure_future(trickle(writer, every, size))
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            answer = await answer_or_close(reader, 5.0)
        finally:
            task.cancel()
            writer.close()
        assert answer not in (None, "waiting", "partial"), answer
        assert_refused(answer, 408, "request_timeout")
        assert words in orjson.loads(answer[2])["error"]["message"]
        assert loop.time() - started < 4.0
        assert await mock.requests() == before
        await control(gw, mock)


# -- point 5: heads a proxy could read otherwise ------------------------------------------

def _key_header(gw: RunningGateway) -> bytes:
    return b"authorization: Bearer " + gw.key.encode() + b"\r\n"


STRICT_HEADS = {
    "two Authorization headers": lambda gw: chat_head(_key_header(gw) + b"authorization: Bearer tw_other\r\n") + BODY,
    "the same key twice": lambda gw: chat_head(_key_header(gw) * 2) + BODY,
    "two x-api-key headers": lambda gw: chat_head(b"x-api-key: " + gw.key.encode() + b"\r\nx-api-key: tw_x\r\n")
    + BODY,
    "HTTP/1.1 without Host": lambda gw: chat_head(_key_header(gw)).replace(b"host: x\r\n", b"") + BODY,
    "two Host headers": lambda gw: chat_head(_key_header(gw) + b"host: y\r\n") + BODY,
}


@pytest.mark.parametrize("build", STRICT_HEADS.values(), ids=STRICT_HEADS.keys())
async def test_ambiguous_heads_get_400_malformed_request(mock, build):
    async with gateway(mock) as gw:
        before = await mock.requests()
        reader, writer = await asyncio.open_connection("127.0.0.1", port_of(gw))
        writer.write(build(gw))
        answer = await answer_or_close(reader, 2.0)
        writer.close()
        assert answer not in (None, "waiting", "partial"), answer
        assert_refused(answer, 400, "malformed_request")
        assert await mock.requests() == before
        await control(gw, mock)


async def test_an_http09_request_is_closed_without_an_answer(mock):
    async with gateway(mock) as gw:
        before = await mock.requests()
        for raw in (b"GET /healthz\r\n\r\n", b"GET /v1/models\r\n" + _key_header(gw) + b"\r\n"):
            reader, writer = await asyncio.open_connection("127.0.0.1", port_of(gw))
            writer.write(raw)
            assert await asyncio.wait_for(reader.read(), 2.0) == b""
            writer.close()
        assert await mock.requests() == before
        await control(gw, mock)


# -- held well before, now kept so: smuggling and header injection ------------------------
# (Content-Length with Transfer-Encoding, two different lengths and gzip/xchunked codings
# are in tests/gateway/test_edge.py; each case here carries a real keyed chat body, so a
# server that accepted the framing would forward it.)

def _chunked(body: bytes) -> bytes:
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)


def _framed(headers: bytes, payload: bytes):
    def build(gw: RunningGateway) -> bytes:
        return (b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                + _key_header(gw) + headers + b"\r\n" + payload)
    return build


_N = b"%d" % len(BODY)
HELD_WELL = {
    "signed length +": (_framed(b"content-length: +" + _N + b"\r\n", BODY), 400, "malformed_request"),
    "signed length -": (_framed(b"content-length: -" + _N + b"\r\n", BODY), 400, "malformed_request"),
    "the same length twice": (_framed(b"content-length: " + _N + b"\r\ncontent-length: " + _N + b"\r\n", BODY),
                              400, "malformed_request"),
    "a list of lengths": (_framed(b"content-length: " + _N + b", " + _N + b"\r\n", BODY), 400, "malformed_request"),
    "a hex length": (_framed(b"content-length: 0x%x\r\n" % len(BODY), BODY), 400, "malformed_request"),
    "transfer-encoding twice": (_framed(b"transfer-encoding: chunked\r\ntransfer-encoding: chunked\r\n",
                                        _chunked(BODY)), 400, "malformed_request"),
    "space before the colon": (_framed(b"transfer-encoding : chunked\r\n", _chunked(BODY)), 400,
                               "malformed_request"),
    "folded transfer-encoding": (_framed(b"transfer-encoding:\r\n chunked\r\n", _chunked(BODY)), 400,
                                 "malformed_request"),
    "vertical tab before chunked": (_framed(b"transfer-encoding: \x0bchunked\r\n", _chunked(BODY)), 400,
                                    "malformed_request"),
    "quoted chunked": (_framed(b'transfer-encoding: "chunked"\r\n', _chunked(BODY)), 501,
                       "transfer_encoding_unsupported"),
    "chunked, identity": (_framed(b"transfer-encoding: chunked, identity\r\n", _chunked(BODY)), 400,
                          "malformed_request"),   # the parser refuses it before our 501 could
    "a negative chunk size": (_framed(b"transfer-encoding: chunked\r\n", b"-5\r\n" + BODY + b"\r\n0\r\n\r\n"), 400,
                              "malformed_request"),
    "bare LF chunk lines": (_framed(b"transfer-encoding: chunked\r\n", b"%x\n%s\n0\n\n" % (len(BODY), BODY)), 400,
                            "malformed_request"),
    "a bare CR in a header value": (_framed(b"x-mock-a: a\rx-injected: 1\r\ncontent-length: " + _N + b"\r\n", BODY),
                                    400, "malformed_request"),
    "a bare LF in a header value": (_framed(b"x-mock-a: a\nx-injected: 1\r\ncontent-length: " + _N + b"\r\n", BODY),
                                    400, "malformed_request"),
    "a NUL in a header value": (_framed(b"x-mock-a: a\x00b\r\ncontent-length: " + _N + b"\r\n", BODY), 400,
                                "malformed_request"),
    "a NUL in a header name": (_framed(b"x-mock\x00a: b\r\ncontent-length: " + _N + b"\r\n", BODY), 400,
                               "malformed_request"),
}


@pytest.mark.parametrize("build,status,code", HELD_WELL.values(), ids=HELD_WELL.keys())
async def test_smuggling_and_header_injection_never_reach_the_backend(mock, build, status, code):
    async with gateway(mock) as gw:
        before = await mock.requests()
        reader, writer = await asyncio.open_connection("127.0.0.1", port_of(gw))
        writer.write(build(gw))
        answer = await answer_or_close(reader, 2.0)
        assert answer not in (None, "waiting", "partial"), answer
        assert_refused(answer, status, code)
        assert answer[1]["connection"] == "close"
        assert await asyncio.wait_for(reader.read(), 3.0) == b""   # nothing after it is parsed
        writer.close()
        assert await mock.requests() == before
        await control(gw, mock)
