"""``/readyz`` tells the truth about the budget store: with the real redis-server stopped it is
503 within 2 s and names ``budget_store`` (while completions are refused
``budget_store_unavailable``), and it is 200 again once Redis is back."""

from __future__ import annotations

import asyncio
import time

import httpx

from tests.fixtures.redis_server import redis_server, redis_server_session  # noqa: F401
from tests.support import base_config, chat, gateway_in_process, mock_backend


async def _ready_within(client: httpx.AsyncClient, url: str, status: int, seconds: float) -> tuple[float, dict]:
    started = time.monotonic()
    while True:
        reply = await client.get(url + "/readyz")
        if reply.status_code == status:
            return time.monotonic() - started, reply.json()
        assert time.monotonic() - started < seconds, (reply.status_code, reply.text)
        await asyncio.sleep(0.05)


async def test_readyz_names_the_budget_store_while_redis_is_down(redis_server):
    extra = f'store: {{url: "{redis_server.url}", timeout_ms: 200}}\n'
    async with mock_backend() as mock, gateway_in_process(base_config(mock.url, extra=extra)) as gw:
        async with gw.client() as client:
            took, body = await _ready_within(client, gw.url, 200, 5)
            assert body["status"] == "ok" and body["stores"]["budget_store"]["healthy"] is True
            assert (await client.post(gw.url + "/v1/chat/completions", json=chat())).status_code == 200

            redis_server.stop()
            took, body = await _ready_within(client, gw.url, 503, 2.0)
            assert body["unavailable"] == ["budget_store"]
            assert body["stores"]["budget_store"] == {**body["stores"]["budget_store"], "healthy": False}
            assert "redis" not in str(body["stores"]).lower()     # no address in a public answer
            before = await mock.requests()
            refused = await client.post(gw.url + "/v1/chat/completions", json=chat())
            assert refused.status_code == 503
            assert refused.json()["error"]["code"] == "budget_store_unavailable"
            assert refused.headers["x-tokenward-reason"] == "budget_store_unavailable"
            assert await mock.requests() == before

            redis_server.start()
            took, body = await _ready_within(client, gw.url, 200, 5)
            assert body["status"] == "ok" and "unavailable" not in body


async def test_readyz_is_cheap_on_the_store_while_polled(redis_server):
    """Polled in a tight loop, the store is probed about once a second, not once a poll."""
    extra = f'store: {{url: "{redis_server.url}"}}\n'
    async with mock_backend() as mock, gateway_in_process(base_config(mock.url, extra=extra)) as gw:
        store = gw.gateway.parts.budget.shared.store
        async with gw.client() as client:
            await _ready_within(client, gw.url, 200, 5)
            trips = store.round_trips
            for _ in range(40):
                assert (await client.get(gw.url + "/readyz")).status_code == 200
            assert store.round_trips - trips <= 2


def _store_up(text: str) -> float:
    line = next(line for line in text.splitlines() if line.startswith("tokenward_budget_store_up "))
    return float(line.split()[1])


def _lines(caplog, needle: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "tokenward.budget" and needle in r.getMessage()]


async def test_store_up_follows_each_call_and_the_outage_is_logged_once_each_way(redis_server, caplog):
    """``tokenward_budget_store_up`` is 0 from the first failed call (the breaker opens only
    after five in a row) and 1 again from the first answer; the log says "down" once and
    "answering again" once, however many requests fail in between."""
    import logging

    caplog.set_level(logging.INFO, logger="tokenward.budget")
    extra = f'store: {{url: "{redis_server.url}", timeout_ms: 200}}\nserver: {{expose_metrics: true}}\n'
    async with mock_backend() as mock, gateway_in_process(base_config(mock.url, extra=extra)) as gw:
        breaker = gw.gateway.parts.budget.shared.breaker
        async with gw.client() as client:
            assert (await client.post(gw.url + "/v1/chat/completions", json=chat())).status_code == 200
            assert _store_up((await client.get(gw.url + "/metrics")).text) == 1.0

            redis_server.stop()
            before = await mock.requests()
            refused = await client.post(gw.url + "/v1/chat/completions", json=chat())
            assert refused.status_code == 503 and refused.json()["error"]["code"] == "budget_store_unavailable"
            assert not breaker.down                               # one failure: the breaker is still closed
            assert _store_up((await client.get(gw.url + "/metrics")).text) == 0.0
            for _ in range(6):
                assert (await client.post(gw.url + "/v1/chat/completions", json=chat())).status_code == 503
            assert await mock.requests() == before
            assert len(_lines(caplog, "budget store down")) == 1
            assert not _lines(caplog, "answering again")

            redis_server.start()
            await _ready_within(client, gw.url, 200, 5)             # /readyz's probe answered: up again
            assert _store_up((await client.get(gw.url + "/metrics")).text) == 1.0
            assert (await client.post(gw.url + "/v1/chat/completions", json=chat())).status_code == 200
            assert len(_lines(caplog, "budget store down")) == 1
            assert len(_lines(caplog, "budget store answering again")) == 1
            assert all("redis" not in line.lower() for line in _lines(caplog, "budget store"))


async def test_readyz_probe_alone_moves_the_gauge(redis_server):
    """No request at all: /readyz's probe of a stopped Redis sets the gauge to 0."""
    extra = f'store: {{url: "{redis_server.url}", timeout_ms: 200}}\nserver: {{expose_metrics: true}}\n'
    async with mock_backend() as mock, gateway_in_process(base_config(mock.url, extra=extra)) as gw:
        async with gw.client() as client:
            await _ready_within(client, gw.url, 200, 5)
            assert _store_up((await client.get(gw.url + "/metrics")).text) == 1.0
            redis_server.stop()
            await _ready_within(client, gw.url, 503, 3)
            assert _store_up((await client.get(gw.url + "/metrics")).text) == 0.0
            redis_server.start()
            await _ready_within(client, gw.url, 200, 5)
            assert _store_up((await client.get(gw.url + "/metrics")).text) == 1.0
            assert await mock.requests() == 0
