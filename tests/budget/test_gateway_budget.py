"""Admission through the real gateway (identity keys, validation, work, forward) in this process.

Every refusal is checked for its status, its reason code, and that the backend's request
counter did not move, next to requests that got through.
"""

from __future__ import annotations

import asyncio

import pytest

from tokenward.budget.limits import tenant_namespace
from tokenward.budget.policy import SCALE

from .conftest import FakeClock
from .gateway_helpers import backend, budget_config, chat, in_process

pytestmark = pytest.mark.usefixtures("sdk_clients_closed")   # tests/conftest.py


@pytest.fixture(params=["memory", "redis", "redis-cluster"])
def store_url(request) -> str:
    if request.param == "memory":
        return "memory"
    if request.param == "redis-cluster":
        cluster = request.getfixturevalue("redis_cluster")
        cluster.flush()
        return cluster.url
    return request.getfixturevalue("redis_server").url


async def reserved_of(gw, count: int) -> list[int]:
    """The reservation of each admitted request, from the decision records."""
    return [r["notes"]["budget"]["reserved"] for r in await gw.wait_decisions(count)
            if r.get("status") == 200 and isinstance((r.get("notes") or {}).get("budget"), dict)]


async def burst(gw, key, n: int, hold: str | None, **body) -> list:
    headers = {**key, **({"x-mock-hold": hold} if hold else {})}
    return await asyncio.gather(*(gw.client.post("/v1/chat/completions", json=chat(**body), headers=headers)
                                  for _ in range(n)))


async def test_concurrent_requests_never_exceed_the_budget(tmp_path, store_url):
    """Same-tenant requests that fit alone but not together, held in the backend at a barrier."""
    async with backend() as mock:
        config = budget_config(tmp_path, mock.port, store_url, tpm=2000, max_output=200)
        async with in_process(config, clock=FakeClock()) as gw:
            key = await gw.new_key()
            probe = await gw.client.post("/v1/chat/completions", json=chat(max_tokens=200), headers=key)
            assert probe.status_code == 200, probe.text
            per_request = (await reserved_of(gw, 1))[0]
            await gw.settled()
            assert await mock.requests() == 1
            before = await gw.store.value(tenant_namespace("tw", "acme") + ":b:tokens")
            budget_now = before[0] // SCALE
            fits = budget_now // per_request
            assert 1 < fits < 20
            tasks = asyncio.ensure_future(burst(gw, key, 20, "barrier", max_tokens=200))
            await mock.wait_held(fits)
            await asyncio.sleep(0.2)   # anything else in flight has been answered by now
            assert (await mock.stats())["held"] == fits
            assert await mock.requests() == 1 + fits     # the excess never reached the backend
            await mock.release("barrier")
            responses = await tasks
            admitted = [r for r in responses if r.status_code == 200]
            refused = [r for r in responses if r.status_code != 200]
            assert len(admitted) == fits and len(admitted) * per_request <= budget_now
            for r in refused:
                assert r.status_code == 429 and r.json()["error"]["code"] == "token_budget"
                assert int(r.headers["retry-after"]) >= 1
            assert "x-ratelimit-remaining-tokens" in admitted[0].headers
            await gw.settled()


async def test_max_tokens_flood_is_held_to_the_budget_with_an_honest_retry_after(tmp_path, store_url):
    """T tokens a minute, max output M: tiny prompts asking max_tokens 100000 admit T / (prompt + M)."""
    clock = FakeClock()
    async with backend() as mock:
        config = budget_config(tmp_path, mock.port, store_url, tpm=4000, max_output=200)
        async with in_process(config, clock=clock) as gw:
            key = await gw.new_key()
            responses = await burst(gw, {**key, "x-mock-tokens": "200"}, 40, None, max_tokens=100_000)
            admitted = [r for r in responses if r.status_code == 200]
            refused = [r for r in responses if r.status_code != 200]
            per_request = (await reserved_of(gw, 40))[0]
            assert per_request < 4000 // 10     # prompt + clamped output, nowhere near 100000
            # the clock does not move, so refunds of the real usage (prompt + 200) are all that come back
            assert len(admitted) >= 4000 // per_request
            assert await mock.requests() == len(admitted)
            assert refused and all(r.status_code == 429 and r.json()["error"]["code"] == "token_budget"
                                   for r in refused)
            assert all(r.json()["error"]["param"] == "max_tokens" for r in refused)
            retry = max(int(r.headers["retry-after"]) for r in refused)
            await gw.settled()
            clock.advance(retry)
            again = await gw.client.post("/v1/chat/completions", json=chat(max_tokens=100_000), headers=key)
            assert again.status_code == 200, again.text
            await gw.settled()


async def test_flood_held_at_a_barrier_admits_exactly_budget_over_work(tmp_path, store_url):
    async with backend() as mock:
        config = budget_config(tmp_path, mock.port, store_url, tpm=4000, max_output=200)
        async with in_process(config, clock=FakeClock()) as gw:   # frozen: no refill, exact count
            key = await gw.new_key()
            responses = asyncio.ensure_future(burst(gw, key, 40, "flood", max_tokens=100_000))
            await asyncio.sleep(0.5)
            await mock.release("flood")
            responses = await responses
            per_request = (await reserved_of(gw, 40))[0]
            admitted = sum(r.status_code == 200 for r in responses)
            assert admitted == 4000 // per_request
            assert await mock.requests() == admitted
            await gw.settled()


async def test_terminal_spend_cap_and_the_sdk_does_not_retry(tmp_path):
    import openai

    async with backend() as mock:
        config = budget_config(tmp_path, mock.port, "memory", tpm=1_000_000, max_output=200,
                               plans={"team": {"models": ["small-chat"], "max_output_tokens": 200,
                                               "daily_spend_usd": 0.0005}})
        async with in_process(config, clock=FakeClock()) as gw:
            key = await gw.new_key()
            first = await gw.client.post("/v1/chat/completions", json=chat(max_tokens=200),
                                         headers={**key, "x-mock-tokens": "200"})
            assert first.status_code == 200   # really spends ~410 micro-USD of a 500 cap
            refused = await gw.client.post("/v1/chat/completions", json=chat(max_tokens=200), headers=key)
            assert refused.status_code == 429 and refused.json()["error"]["code"] == "spend_cap"
            assert refused.headers["x-should-retry"] == "false" and "retry-after" not in refused.headers
            assert await mock.requests() == 1
            sdk = openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key=key["authorization"].split()[1], max_retries=3)
            with pytest.raises(openai.RateLimitError):
                await sdk.chat.completions.create(model="small-chat", max_tokens=200,
                                                  messages=[{"role": "user", "content": "hi"}])
            records = await gw.wait_decisions(3)
            assert [r["reason"] for r in records[1:]] == ["spend_cap", "spend_cap"]   # one attempt, no retries
            await sdk.close()
            assert await mock.requests() == 1


async def test_open_streams_and_request_rate_answers(tmp_path):
    async with backend() as mock:
        config = budget_config(tmp_path, mock.port, "memory", tpm=1_000_000, streams=1,
                               plans={"team": {"models": ["small-chat"], "max_output_tokens": 200,
                                               "max_concurrent_streams": 1, "requests_per_minute": 2}})
        async with in_process(config, clock=FakeClock()) as gw:
            key = await gw.new_key()
            held = asyncio.ensure_future(gw.client.post("/v1/chat/completions", json=chat(max_tokens=20),
                                                        headers={**key, "x-mock-hold": "one"}))
            await mock.wait_held(1)
            busy = await gw.client.post("/v1/chat/completions", json=chat(max_tokens=20), headers=key)
            assert busy.status_code == 429 and busy.json()["error"]["code"] == "concurrency_limit"
            assert busy.headers["retry-after"] == "1"   # a slot frees when a request ends: retry soon (issue 31)
            await mock.release("one")
            admitted = await held
            assert admitted.status_code == 200
            assert admitted.headers["x-ratelimit-limit-requests"] == "2"
            assert admitted.headers["x-ratelimit-remaining-requests"] == "1"
            assert admitted.headers["x-ratelimit-limit-tokens"] == "100000"   # the plan default
            await gw.settled()
            second = await gw.client.post("/v1/chat/completions", json=chat(max_tokens=20), headers=key)
            assert second.status_code == 200
            limited = await gw.client.post("/v1/chat/completions", json=chat(max_tokens=20), headers=key)
            assert limited.status_code == 429 and limited.json()["error"]["code"] == "rate_limited"
            assert limited.headers["retry-after"] == "30"    # 2 a minute: one back every 30 s
            # 429s carry the x-ratelimit-* headers too, as OpenAI's do (they used to carry none)
            assert limited.headers["x-ratelimit-limit-requests"] == "2"
            assert limited.headers["x-ratelimit-remaining-requests"] == "0"
            assert limited.headers["x-ratelimit-reset-requests"] == "1m0s"   # until full again
            assert limited.headers["x-ratelimit-limit-tokens"] == "100000"
            assert "x-ratelimit-remaining-tokens" in busy.headers and "x-ratelimit-reset-tokens" in busy.headers
            assert await mock.requests() == 2
