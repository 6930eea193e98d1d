"""Per-key limits through the gateway: a key created with its own token rate (the admin API's
``tokens_per_minute``) or spend cap (``keys create --daily-spend-usd``) is held to it exactly
under concurrent requests, in memory and on a real redis-server; the refused requests never
reach the backend (its counter), and a key of the same tenant without limits of its own (the
control) gets through."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine

import pytest
from typer.testing import CliRunner

from tests.fixtures.redis_server import redis_server  # noqa: F401
from tests.support import base_config, chat, gateway_in_process, mock_backend
from tokenward.cli.main import app

ADMIN_TOKEN = "key-limits-admin-token"
PRICED = "context_window: 32768, input_price_per_million: 1000, output_price_per_million: 1000, serves"
CONCURRENT, FIT = 12, 5


def _config(mock_url: str, store: str) -> str:
    extra = f'store: {{url: "{store}"}}\nadmin: {{token_env: TW_KEY_LIMITS_ADMIN}}\n'
    return (base_config(mock_url, extra=extra).replace("context_window: 32768, serves", PRICED)
            .replace("max_output_tokens: 4096}", "max_output_tokens: 4096, max_concurrent_streams: 64}"))


async def _probe(gw, client) -> dict:
    """What one request reserves (tokens, micro-USD), read from its reservation as the
    admission stage leaves it, through a key without limits of its own."""
    stage = gw.gateway.parts.stages
    seen: dict = {}
    admission = next(s for s in stage if getattr(s, "name", "") == "admission")
    original = admission.decide

    async def finished(ctx, decided):
        refusal = await decided
        seen["tokens"], seen["cost"] = ctx.reservation.tokens, ctx.reservation.cost_units
        return refusal

    def spy(ctx):   # the stage's plain decision, or the coroutine that finishes it (a store waited for)
        decided = original(ctx)
        if isinstance(decided, Coroutine):
            return finished(ctx, decided)
        seen["tokens"], seen["cost"] = ctx.reservation.tokens, ctx.reservation.cost_units
        return decided

    admission.decide = spy
    try:
        assert (await client.post(gw.url + "/v1/chat/completions", json=chat())).status_code == 200
    finally:
        admission.decide = original
    return seen


async def _concurrent(gw, client, mock, key: str) -> list:
    """CONCURRENT requests on one key, held in the backend until every one was decided."""
    headers = {"authorization": f"Bearer {key}", "x-mock-hold": "kl"}
    tasks = [asyncio.ensure_future(client.post(gw.url + "/v1/chat/completions", json=chat(), headers=headers))
             for _ in range(CONCURRENT)]
    deadline = asyncio.get_running_loop().time() + 20
    while sum(t.done() for t in tasks) < CONCURRENT - FIT or (await mock.stats())["held"] < FIT:
        assert asyncio.get_running_loop().time() < deadline, ([t.result().text for t in tasks if t.done()], await mock.stats())
        await asyncio.sleep(0.02)
    held = (await mock.stats())["held"]
    await mock.release("kl")
    return [held, *(await asyncio.gather(*tasks))]


@pytest.mark.parametrize("store", ["memory", "redis"])
async def test_a_keys_token_rate_holds_under_concurrency(store, request, monkeypatch):
    url = request.getfixturevalue("redis_server").url if store == "redis" else "memory"
    monkeypatch.setenv("TW_KEY_LIMITS_ADMIN", ADMIN_TOKEN)
    async with mock_backend() as mock, gateway_in_process(_config(mock.url, url)) as gw:
        async with gw.client(timeout=30) as client:
            per_request = (await _probe(gw, client))["tokens"]
            created = await client.post(gw.url + "/admin/keys", headers={"authorization": f"Bearer {ADMIN_TOKEN}"},
                                        json={"tenant": "acme", "tokens_per_minute": FIT * per_request + per_request // 2})
            assert created.status_code == 201, created.text
            assert created.json()["tokens_per_minute"] == FIT * per_request + per_request // 2
            before = await mock.requests()
            held, *replies = await _concurrent(gw, client, mock, created.json()["key"])
            assert held == FIT
            assert sorted(r.status_code for r in replies) == [200] * FIT + [429] * (CONCURRENT - FIT)
            refused = [r for r in replies if r.status_code == 429]
            assert {r.json()["error"]["code"] for r in refused} == {"token_budget"}
            assert all("key_tokens" in r.json()["error"]["message"] for r in refused)
            assert await mock.requests() == before + FIT          # the backend saw the admitted ones only
            control = await client.post(gw.url + "/v1/chat/completions", json=chat())   # gw.key: no own limits
            assert control.status_code == 200
            assert await mock.requests() == before + FIT + 1


@pytest.mark.parametrize("store", ["memory", "redis"])
async def test_a_keys_daily_spend_cap_from_the_cli_holds_under_concurrency(store, request, monkeypatch, tmp_path):
    url = request.getfixturevalue("redis_server").url if store == "redis" else "memory"
    monkeypatch.setenv("TW_KEY_LIMITS_ADMIN", ADMIN_TOKEN)
    async with mock_backend() as mock:
        text = _config(mock.url, url)
        path = tmp_path / "gw.yaml"
        path.write_text(text)
        async with gateway_in_process(text) as gw:
            async with gw.client(timeout=30) as client:
                cost = (await _probe(gw, client))["cost"]
                cap_usd = (FIT * cost + cost // 2) / 1e6
                env = {"TOKENWARD_CONFIG": str(path), "TOKENWARD_STORE_URL": None}
                done = await asyncio.to_thread(CliRunner().invoke, app, [
                    "keys", "create", "--tenant", "acme", "--daily-spend-usd", repr(cap_usd)], env=env)
                assert done.exit_code == 0, done.output
                key = done.stdout.strip()
                before = await mock.requests()
                held, *replies = await _concurrent(gw, client, mock, key)
                assert held == FIT
                assert sorted(r.status_code for r in replies) == [200] * FIT + [429] * (CONCURRENT - FIT)
                refused = [r for r in replies if r.status_code == 429]
                assert {r.json()["error"]["code"] for r in refused} == {"spend_cap"}
                assert all(r.headers["x-should-retry"] == "false" for r in refused)
                assert all("this API key's own spend cap" in r.json()["error"]["message"] for r in refused)
                assert await mock.requests() == before + FIT
                control = await client.post(gw.url + "/v1/chat/completions", json=chat())
                assert control.status_code == 200


async def test_key_limits_above_the_plan_or_not_numbers_are_refused(monkeypatch, tmp_path):
    monkeypatch.setenv("TW_KEY_LIMITS_ADMIN", ADMIN_TOKEN)
    async with mock_backend() as mock:
        text = _config(mock.url, "memory").replace("max_concurrent_streams: 64}",
                                                    "max_concurrent_streams: 64, tokens_per_minute: 1000}")
        path = tmp_path / "gw.yaml"
        path.write_text(text)
        async with gateway_in_process(text) as gw:
            async with gw.client() as client:
                admin = {"authorization": f"Bearer {ADMIN_TOKEN}"}
                above = await client.post(gw.url + "/admin/keys", headers=admin,
                                          json={"tenant": "acme", "tokens_per_minute": 5000})
                assert above.status_code == 400 and above.json()["error"]["code"] == "invalid_field"
                assert "above the plan's 1000" in above.json()["error"]["message"]
                bad = await client.post(gw.url + "/admin/keys", headers=admin,
                                        json={"tenant": "acme", "daily_spend_usd": -1})
                assert bad.status_code == 400 and bad.json()["error"]["param"] == "daily_spend_usd"
                listed = (await client.get(gw.url + "/admin/keys", headers=admin)).json()["data"]
                assert len(listed) == 1    # only the test's own key: nothing was created
        env = {"TOKENWARD_CONFIG": str(path), "TOKENWARD_STORE_URL": None}
        cli = await asyncio.to_thread(CliRunner().invoke, app,
                                      ["keys", "create", "--tenant", "acme", "--tokens-per-minute", "5000"], env=env)
        assert cli.exit_code == 1 and "above the plan's 1000" in cli.stderr and cli.stdout == ""
        cli = await asyncio.to_thread(CliRunner().invoke, app,
                                      ["keys", "create", "--tenant", "acme", "--daily-spend-usd", "0"], env=env)
        assert cli.exit_code == 2 and "--daily-spend-usd must be a positive number" in cli.stderr
