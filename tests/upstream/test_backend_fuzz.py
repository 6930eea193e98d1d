"""A backend that answers mangled HTTP: broken status lines, framing, chunk sizes, JSON and
SSE, and connections dropped after an answer. Whatever it sends, the client gets a 200
passed through or a clean 502/504 in the envelope, nothing is logged as an error, and no
reservation or pooled connection is left behind.

The mutations are seeded (``tests/fuzzing.py``), so a failure names the seed that
reproduces it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random

import httpx
import pytest

from tests.fuzzing import mutate
from tests.support import base_config, chat, gateway_in_process

_JSON = (b'{"id":"x","object":"chat.completion","created":1,"model":"small-chat","choices":[{"index":0,'
         b'"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],'
         b'"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}')
_SSE = (b'data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"small-chat","choices":[{"index":0,'
        b'"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
        b'data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"small-chat","choices":[],'
        b'"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}\n\ndata: [DONE]\n\n')
_ANSWERS = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(_JSON) + _JSON,
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n%x\r\n" % len(_SSE)
    + _SSE + b"\r\n0\r\n\r\n",
)


@contextlib.asynccontextmanager
async def mangling_backend(rng: random.Random):
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                await reader.readexactly(length)
                writer.write(mutate(rng, rng.choice(_ANSWERS)))
                await writer.drain()
                if rng.random() < 0.3:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    finally:
        server.close()


@pytest.mark.parametrize("seed", [1, 2])
async def test_a_mangling_backend_gets_the_client_a_pass_through_or_a_clean_502_or_504(caplog, seed):
    caplog.set_level(logging.ERROR)
    async with mangling_backend(random.Random(seed)) as url:
        config = base_config(url, extra="stream: {idle_timeout_s: 0.5, max_duration_s: 2}\n")
        config = config.replace("max_output_tokens: 4096}", "max_output_tokens: 4096, max_concurrent_streams: 1000}")
        config = config.replace("read_timeout_s: 10", "read_timeout_s: 0.5")
        async with gateway_in_process(config) as gw, httpx.AsyncClient(headers=gw.auth, timeout=10) as client:
            limit = asyncio.Semaphore(8)

            async def one(i: int) -> tuple[int, str | None]:
                async with limit:
                    resp = await client.post(gw.url + "/v1/chat/completions", json=chat(max_tokens=5, stream=i % 2 == 1))
                if resp.status_code == 200:
                    return 200, None
                return resp.status_code, resp.json()["error"]["code"]

            results = await asyncio.gather(*(one(i) for i in range(150)))
            admitter = gw.gateway.parts.budget
            assert not admitter.keeper.open                    # every reservation settled
            await asyncio.sleep(0.05)   # a connection dropped with its last answer closes now
            stats = gw.gateway.parts.targets.pools["mock"].stats
    allowed = {(200, None), (502, "upstream_unavailable"), (504, "upstream_timeout"), (502, "upstream_error"),
               (502, "upstream_truncated"), (504, "stream_idle_timeout")}
    assert set(results) <= allowed, set(results) - allowed
    assert {status for status, _ in results} >= {200, 502}     # both sides of the fuzz were reached
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    assert stats["open"] == stats["idle"] and stats["waiting"] == 0, stats   # no connection held
