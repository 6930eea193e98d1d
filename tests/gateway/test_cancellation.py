"""A client that goes away cancels the backend's work at once, in every phase."""

from __future__ import annotations

import asyncio

import orjson

from tests.support import chat


async def _open(gw, body: dict, headers: dict[str, str]):
    headers = {**gw.auth, **headers}
    host, port = gw.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    data = orjson.dumps(body)
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\n"
            f"content-length: {len(data)}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()))
    writer.write(head.encode() + b"\r\n" + data)
    await writer.drain()
    return reader, writer


async def _wait_for(mock, predicate, timeout=3.0):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        stats = await mock.stats()
        if predicate(stats):
            return stats
        if loop.time() > deadline:
            raise AssertionError(f"backend never reached the state: {stats}")
        await asyncio.sleep(0.01)


async def _assert_generation_stopped(mock, cancelled_before: int) -> dict:
    stats = await _wait_for(mock, lambda s: s["cancelled"] > cancelled_before, timeout=0.5)
    first = stats["tokens_generated"]
    await asyncio.sleep(0.1)
    later = await mock.stats()
    assert later["tokens_generated"] == first, "backend kept generating after the client left"
    assert later["active_streams"] == 0
    return later


async def test_disconnect_mid_stream_stops_generation_within_100ms(any_gw, mock):
    reader, writer = await _open(any_gw, chat(max_tokens=2000, stream=True),
                                 {"x-mock-token-rate": "200", "x-mock-tokens": "2000"})
    seen = b""
    while seen.count(b"data: ") < 4:
        seen += await asyncio.wait_for(reader.read(4096), 5)
    before = await mock.stats()
    assert before["tokens_generated"] >= 3 and before["active_streams"] == 1
    loop = asyncio.get_running_loop()
    writer.transport.abort()
    t0 = loop.time()
    stats = await _wait_for(mock, lambda s: s["cancelled"] == 1, timeout=0.5)
    assert loop.time() - t0 < 0.1 + 0.05  # detection plus one stats round trip
    after = await _assert_generation_stopped(mock, 0)
    assert after["tokens_generated"] < 2000
    assert stats["cancelled"] == 1
    record = any_gw.decisions()[-1]
    assert record["reason"] == "client_disconnected" and record["state"] == "aborted"


async def test_disconnect_before_first_token(any_gw, mock):
    reader, writer = await _open(any_gw, chat(stream=True), {"x-mock-delay-ms": "5000"})
    await _wait_for(mock, lambda s: s["requests"] == 1)
    writer.transport.abort()
    after = await _assert_generation_stopped(mock, 0)
    assert after["tokens_generated"] == 0 and after["cancelled"] == 1


async def test_disconnect_during_non_streaming_generation(any_gw, mock):
    reader, writer = await _open(any_gw, chat(max_tokens=2000),
                                 {"x-mock-token-rate": "100", "x-mock-tokens": "2000"})
    await _wait_for(mock, lambda s: s["tokens_generated"] >= 3)
    writer.transport.abort()
    after = await _assert_generation_stopped(mock, 0)
    assert after["tokens_generated"] < 2000 and after["cancelled"] == 1


async def test_gateway_keeps_serving_after_disconnects(any_gw, mock):
    for _ in range(3):
        reader, writer = await _open(any_gw, chat(stream=True), {"x-mock-hang": "1"})
        await _wait_for(mock, lambda s: s["requests"] >= 1)
        writer.transport.abort()
    await _wait_for(mock, lambda s: s["cancelled"] == 3)
    reader, writer = await _open(any_gw, chat(max_tokens=2), {})
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert head.startswith(b"HTTP/1.1 200")
    writer.close()


async def test_own_protocol_notices_disconnects_without_a_watcher_task(gw, mock, monkeypatch):
    from tokenward.pipeline.disconnect import DisconnectWatch

    watchers = []
    original = DisconnectWatch._watch

    async def spy(self):
        watchers.append(self)
        await original(self)

    monkeypatch.setattr(DisconnectWatch, "_watch", spy)
    reader, writer = await _open(gw, chat(stream=True), {"x-mock-delay-ms": "5000"})
    await _wait_for(mock, lambda s: s["requests"] == 1)
    writer.transport.abort()
    await _assert_generation_stopped(mock, 0)
    assert watchers == []
