"""Time and fault steering of the mock upstream, and what a client hang-up does."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from tests.mock._mock_helpers import chat

from tokenward.mock import start_mock, stop_mock


async def _hang_up(writer: asyncio.StreamWriter) -> None:
    writer.close()
    await writer.wait_closed()


async def _read_all(reader: asyncio.StreamReader, timeout: float = 3.0) -> bytes:
    return await asyncio.wait_for(reader.read(), timeout)


async def test_hold_and_release(mock):
    async def held_call():
        return await mock.client.post("/v1/chat/completions", json=chat(), headers={"x-mock-hold": "gate"})

    tasks = [asyncio.create_task(held_call()) for _ in range(3)]
    await mock.wait_stats(lambda s: s["held"] == 3)
    assert not any(t.done() for t in tasks)
    resp = await mock.client.post("/_mock/release", json={"name": "other"})
    assert resp.json() == {"released": 0}
    resp = await mock.client.post("/_mock/release", json={"name": "gate"})
    assert resp.json() == {"released": 3}
    results = await asyncio.gather(*tasks)
    assert all(r.status_code == 200 for r in results)
    stats = await mock.stats()
    assert stats["held"] == 0 and stats["tokens_generated"] == 48 and stats["cancelled"] == 0


async def test_held_client_leaving_is_cancelled(mock):
    reader, writer = await mock.raw("/v1/chat/completions", chat(), {"x-mock-hold": "gate"})
    await mock.wait_stats(lambda s: s["held"] == 1)
    await _hang_up(writer)
    stats = await mock.wait_stats(lambda s: s["cancelled"] == 1)
    assert stats["held"] == 0
    assert (await mock.client.post("/_mock/release", json={"name": "gate"})).json() == {"released": 0}


async def test_hang_then_disconnect_counts_cancelled(mock):
    reader, writer = await mock.raw("/v1/chat/completions", chat(stream=True), {"x-mock-hang": "1"})
    await mock.wait_stats(lambda s: s["requests"] == 1)
    # Nothing at all, not even headers, while the mock hangs.
    try:
        data = await asyncio.wait_for(reader.read(1), 0.2)
    except asyncio.TimeoutError:
        data = b""
    assert data == b""
    await _hang_up(writer)
    stats = await mock.wait_stats(lambda s: s["cancelled"] == 1)
    assert stats["tokens_generated"] == 0


async def _assert_generation_stopped(mock) -> dict:
    stats = await mock.wait_stats(lambda s: s["cancelled"] == 1 and s["active_streams"] == 0)
    first = stats["tokens_generated"]
    await asyncio.sleep(0.15)
    assert (await mock.stats())["tokens_generated"] == first
    return stats


async def test_stream_disconnect_stops_generation(mock):
    headers = {"x-mock-tokens": "1000", "x-mock-token-rate": "100"}
    async with mock.client.stream("POST", "/v1/chat/completions", json=chat(stream=True), headers=headers) as resp:
        lines = 0
        async for line in resp.aiter_lines():
            lines += line.startswith("data: ")
            if lines == 5:
                break
        assert (await mock.stats())["active_streams"] == 1
    stats = await _assert_generation_stopped(mock)
    assert 4 <= stats["tokens_generated"] < 50


async def test_disconnect_during_delay(mock):
    reader, writer = await mock.raw("/v1/chat/completions", chat(stream=True), {"x-mock-delay-ms": "5000"})
    await mock.wait_stats(lambda s: s["active_streams"] == 1)
    await _hang_up(writer)
    stats = await _assert_generation_stopped(mock)
    assert stats["tokens_generated"] == 0


async def test_non_stream_disconnect_at_rate(mock):
    headers = {"x-mock-tokens": "1000", "x-mock-token-rate": "200"}
    reader, writer = await mock.raw("/v1/chat/completions", chat(), headers)
    await mock.wait_stats(lambda s: s["tokens_generated"] >= 5)
    await _hang_up(writer)
    stats = await _assert_generation_stopped(mock)
    assert stats["tokens_generated"] < 100


async def test_token_rate_paces_stream(mock):
    headers = {"x-mock-tokens": "10", "x-mock-token-rate": "50", "x-mock-delay-ms": "100"}
    start = time.monotonic()
    arrivals = []
    async with mock.client.stream("POST", "/v1/chat/completions", json=chat(stream=True), headers=headers) as resp:
        async for line in resp.aiter_lines():
            if '"tok "' in line:
                arrivals.append(time.monotonic() - start)
    assert len(arrivals) == 10
    # first token after the delay; then one every 20 ms on a deadline schedule
    assert 0.09 <= arrivals[0] < 0.3
    assert 0.16 <= arrivals[-1] - arrivals[0] < 0.5
    assert (await mock.stats())["cancelled"] == 0


async def test_stall_after_keeps_connection_open(mock):
    headers = {"x-mock-stall-after": "2"}
    reader, writer = await mock.raw("/v1/chat/completions", chat(stream=True), headers)
    data = b""
    while data.count(b'"tok "') < 2:
        data += await asyncio.wait_for(reader.read(65536), 2)
    try:
        more = await asyncio.wait_for(reader.read(65536), 0.2)
    except asyncio.TimeoutError:
        more = None
    assert more is None  # still open, nothing more sent
    assert (await mock.stats())["tokens_generated"] == 2
    await _hang_up(writer)
    await mock.wait_stats(lambda s: s["cancelled"] == 1 and s["active_streams"] == 0)


async def test_die_after_truncates_stream(mock):
    reader, writer = await mock.raw("/v1/chat/completions", chat(stream=True), {"x-mock-die-after": "3"})
    try:
        data = await _read_all(reader)
    except ConnectionResetError:
        data = b""
    finally:
        writer.close()
    head, _, chunked = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert b"transfer-encoding: chunked" in head.lower()
    assert chunked.count(b'"tok "') == 3
    assert b"[DONE]" not in chunked and not chunked.endswith(b"0\r\n\r\n")
    stats = await mock.stats()
    assert stats["died"] == 1 and stats["cancelled"] == 0 and stats["tokens_generated"] == 3

    # An HTTP client sees the cut as an error, not as a complete response.
    with pytest.raises(httpx.HTTPError):
        await mock.client.post("/v1/chat/completions", json=chat(stream=True), headers={"x-mock-die-after": "1"})


async def test_die_after_non_stream_sends_nothing(mock):
    reader, writer = await mock.raw("/v1/chat/completions", chat(), {"x-mock-die-after": "2"})
    try:
        data = await _read_all(reader)
    except ConnectionResetError:
        data = b""
    finally:
        writer.close()
    assert data == b""
    assert (await mock.stats())["died"] == 1


async def test_stop_mock_with_requests_in_flight():
    server, port, app = await start_mock()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
        task = asyncio.create_task(client.post("/v1/chat/completions", json=chat(), headers={"x-mock-hang": "1"}))
        while app.stats.requests == 0:
            await asyncio.sleep(0.01)
        start = time.monotonic()
        await stop_mock(server)
        assert time.monotonic() - start < 2
        try:
            await task
        except httpx.HTTPError:
            pass
