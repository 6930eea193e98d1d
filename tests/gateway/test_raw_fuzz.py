"""Mangled raw requests against the whole gateway: whatever arrives, the answer is a clean
refusal or a closed connection, never a 500 or a logged traceback, and only requests that
were answered 200 reached the backend.

The mutations are seeded, so a failure names the seed that reproduces it.
"""

from __future__ import annotations

import asyncio
import logging
import random

import orjson
import pytest

from tests.fuzzing import mutate
from tests.support import chat


def _requests(key: str) -> list[bytes]:
    body = orjson.dumps(chat(max_tokens=5))
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer " + key.encode()
            + b"\r\ncontent-type: application/json\r\n")
    return [head + b"content-length: %d\r\n\r\n" % len(body) + body,
            head + b"transfer-encoding: chunked\r\n\r\n%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n"]


async def _exchange(port: int, raw: bytes, half_close: bool) -> bytes | None:
    """What came back: up to 2 s for the first bytes, then until the connection closes or
    stays quiet for 0.3 s (a kept-alive connection stays open after its answer). None if
    nothing came: the request is incomplete and the server is right to wait for the rest."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    received = b""
    try:
        writer.write(raw)
        if half_close:
            writer.write_eof()
        async with asyncio.timeout(2.0):
            received = await reader.read(65536)
        if received:
            async with asyncio.timeout(0.3):
                while chunk := await reader.read(65536):
                    received += chunk
    except TimeoutError:
        if not received:
            return None
    finally:
        writer.close()
    return received


@pytest.mark.parametrize("seed", [1, 2])
async def test_mangled_requests_get_a_clean_refusal_or_a_close(gw, mock, caplog, seed):
    caplog.set_level(logging.ERROR)
    rng = random.Random(seed)
    port = int(gw.url.rsplit(":", 1)[1])
    originals = _requests(gw.key)
    limit = asyncio.Semaphore(16)

    async def one(raw: bytes, half_close: bool) -> bytes | None:
        async with limit:
            return await _exchange(port, raw, half_close)

    statuses = []
    # Half-closed connections last: a complete request whose client then half-closes may be
    # cancelled after it was forwarded (a disconnect), so only the first phase counts the
    # backend's requests exactly.
    for half_close in (False, True):
        cases = [mutate(rng, rng.choice(originals)) for _ in range(150)]
        before = await mock.requests()
        answers = await asyncio.gather(*(one(raw, half_close) for raw in cases))
        phase = []
        for raw, answer in zip(cases, answers):
            if not answer:
                continue   # closed without an answer (half-closed, incomplete), or still waiting
            assert answer.startswith(b"HTTP/1.1 "), (raw, answer[:200])
            status = int(answer[9:12])
            assert status < 500 or status == 501, (raw, answer[:400])   # 501: a coding we refuse
            phase.append(status)
        if not half_close:
            await asyncio.sleep(0.2)
            assert await mock.requests() - before == phase.count(200), "\n".join(
                repr((raw[-150:], answer and answer[:100])) for raw, answer in zip(cases, answers)
                if not answer or not answer.startswith(b"HTTP/1.1 4"))
        statuses += phase
    assert statuses.count(400) > 50                       # the fuzz does reach the parser's refusals
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    async with gw.client() as client:                     # and the gateway still serves
        ok = await client.post(gw.url + "/v1/chat/completions", json=chat())
        assert ok.status_code == 200
