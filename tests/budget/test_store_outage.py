"""Killing redis-server under load: 503 budget_store_unavailable, never an admission, and the
gateway recovers by itself when Redis is back."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from tokenward.budget.redis import RedisStore
from tokenward.budget.store import Layout, StoreUnavailable

from .conftest import FakeClock
from .gateway_helpers import backend, budget_config, chat, in_process
from .helpers import NS, bucket, reserve


async def test_killing_redis_under_load_fails_closed_and_recovers(tmp_path, redis_server):
    async with backend() as mock:
        config = budget_config(tmp_path, mock.port, redis_server.url, tpm=10_000_000, max_output=50)
        async with in_process(config) as gw:
            key = await gw.new_key()
            results: list[tuple[float, float, int, str | None]] = []
            stop = asyncio.Event()

            async def worker() -> None:
                while not stop.is_set():
                    started = time.monotonic()
                    resp = await gw.client.post("/v1/chat/completions", json=chat(max_tokens=10), headers=key)
                    code = resp.json().get("error", {}).get("code") if resp.status_code != 200 else None
                    results.append((started, time.monotonic(), resp.status_code, code))

            workers = [asyncio.ensure_future(worker()) for _ in range(4)]
            await asyncio.sleep(0.5)
            assert any(status == 200 for _, _, status, _ in results)
            redis_server.stop()
            killed = time.monotonic()
            await asyncio.sleep(0.3)
            backend_before = await mock.requests()
            await asyncio.sleep(1.0)
            assert await mock.requests() == backend_before     # nothing admitted while the store is gone
            redis_server.start()
            restarted = time.monotonic()
            deadline = restarted + 10
            while not any(start > restarted and status == 200 for start, _, status, _ in results):
                assert time.monotonic() < deadline, "the gateway never recovered"
                await asyncio.sleep(0.05)
            recovered_at = time.monotonic()
            await asyncio.sleep(0.5)
            stop.set()
            await asyncio.gather(*workers)
            during = [(status, code) for start, end, status, code in results if killed < start and end < restarted]
            assert during, "no request ran during the outage"
            assert all(r == (503, "budget_store_unavailable") for r in during), set(during)
            recovered = [r for r in results if r[0] > recovered_at]
            assert recovered and all(status == 200 for _, _, status, _ in recovered)
            await gw.settled()


async def test_a_fail_open_tier_runs_under_a_conservative_local_limiter(tmp_path, redis_server):
    async with backend() as mock:
        config = budget_config(tmp_path, mock.port, redis_server.url, tpm=3000, max_output=100,
                               store={"url": redis_server.url, "fail_open_tiers": ["team"], "fail_open_fraction": 0.25,
                                      "timeout_ms": 200})
        async with in_process(config, clock=FakeClock()) as gw:
            key = await gw.new_key()
            assert (await gw.client.post("/v1/chat/completions", json=chat(max_tokens=100), headers=key)).status_code == 200
            redis_server.stop()
            # a quarter of 3000 tokens/min, held in this process: a few ~110-token requests, never a 503
            tasks = [asyncio.ensure_future(gw.client.post("/v1/chat/completions", json=chat(max_tokens=100),
                                                          headers={**key, "x-mock-hold": "open"}))
                     for _ in range(12)]
            await asyncio.wait(tasks, timeout=1.0)   # the refusals come back at once; the rest are held
            held = (await mock.stats())["held"]
            await mock.release("open")
            responses = await asyncio.gather(*tasks)
            statuses = sorted(r.status_code for r in responses)
            admitted = statuses.count(200)
            assert 1 <= admitted == held <= 750 // 100 and set(statuses) <= {200, 429}, [r.text for r in responses]
            assert all(r.json()["error"]["code"] == "token_budget" for r in responses if r.status_code == 429)
            redis_server.start()


@pytest.mark.parametrize("client", ["resp", "redis-py"])
async def test_a_silent_store_times_out_and_a_busy_gateway_does_not(redis_server, client, clock):
    store = RedisStore(redis_server.url, timeout_s=0.05, client=client)
    layout = Layout(NS, [bucket("tokens", 100)])
    try:
        assert (await store.reserve([reserve(layout, "warm", clock.ms, [1])]))[0].ok
        if client == "resp":
            # The event loop itself stalls past the timeout while the answer waits in the socket.
            pending = asyncio.ensure_future(store.reserve([reserve(layout, "late", clock.ms, [1])]))
            await asyncio.sleep(0.01)
            time.sleep(0.2)
            assert (await pending)[0].ok
        os.kill(redis_server.proc.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            with pytest.raises(StoreUnavailable):
                await store.reserve([reserve(layout, "hung", clock.ms, [1])])
            assert time.monotonic() - started < 0.5
        finally:
            os.kill(redis_server.proc.pid, signal.SIGCONT)
        assert (await store.reserve([reserve(layout, "back", clock.ms, [1])]))[0].ok
    finally:
        await store.close()
