"""Per-key limits: a key's own spend caps and token rate, below its plan's, drawn on in the
same atomic reservation as the plan's limits. Concurrent requests on one key hold the key's
cap exactly, in memory and on a real redis-server (two replicas sharing it too), while a
key of the same tenant without limits of its own (the control) is admitted throughout."""

from __future__ import annotations

import asyncio

import pytest

from tests.budget.conftest import FakeClock
from tests.fixtures.redis_server import redis_server  # noqa: F401
from tokenward.budget.admission import Admitter
from tokenward.budget.limits import tenant_namespace
from tokenward.budget.memory import MemoryStore
from tokenward.budget.policy import SCALE
from tokenward.budget.redis import RedisStore
from tokenward.config.key_limits import KeyLimits
from tokenward.config.loader import effective_plan, parse_config
from tokenward.errors import Reason

CONFIG = """
upstreams: {local: {base_url: "http://127.0.0.1:1/v1"}}
models: {small-chat: {upstream: local, input_price_per_million: 1.0, output_price_per_million: 2.0}}
plans:
  bulk: {models: [small-chat], tokens_per_minute: 1000000, max_concurrent_streams: 1000, daily_spend_usd: 100}
tenants: {acme: {plan: bulk}}
"""
KEY_TPM = 5000            # the key's own rate: 16 requests of 300 tokens fit, the 17th does not
TOKENS, COST = 300, 1000  # per request: tokens, micro-USD
REQUESTS = 40


async def _reserve(admitter: Admitter, key: str, limits: KeyLimits | None, tokens: int = TOKENS, cost: int = COST):
    cfg = admitter.config
    return await admitter.reserve("acme", "bulk", effective_plan(cfg, "acme"), key, "small-chat", "local",
                                  tokens, cost, None, limits)


async def _admitters(kind: str, redis_server, clock: FakeClock) -> list[Admitter]:
    cfg = parse_config(CONFIG, environ={})
    if kind == "memory":
        return [Admitter(cfg, MemoryStore(), clock=clock)]
    # two replicas, each with its own connection, one shared Redis, each warmed as serve does
    admitters = [Admitter(cfg, RedisStore(redis_server.url, timeout_s=2.0), clock=clock) for _ in range(2)]
    for admitter in admitters:
        await admitter.warm()
    return admitters


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_concurrent_requests_hold_the_keys_token_rate_exactly(kind, request):
    server = request.getfixturevalue("redis_server") if kind == "redis" else None
    clock = FakeClock()
    admitters = await _admitters(kind, server, clock)
    limits = KeyLimits(tokens_per_minute=KEY_TPM)
    try:
        decisions = await asyncio.gather(*(_reserve(admitters[i % len(admitters)], "kA", limits)
                                           for i in range(REQUESTS)))
        admitted = [d for d in decisions if d.admitted]
        refused = [d for d in decisions if not d.admitted]
        assert len(admitted) == KEY_TPM // TOKENS == 16
        assert {(d.reason, d.limit) for d in refused} == {(Reason.token_budget, "key_tokens")}
        # the store's own counter: the key's bucket holds exactly what 16 reservations left
        key_bucket = f"{tenant_namespace('tw', 'acme')}:k:kA:b:tokens"
        level, _ = await admitters[0].shared.store.value(key_bucket)
        assert level == (KEY_TPM - 16 * TOKENS) * SCALE
        # the control: another key of the same tenant, no limits of its own, is admitted throughout
        control = await asyncio.gather(*(_reserve(admitters[0], "kB", None) for _ in range(REQUESTS)))
        assert all(d.admitted for d in control)
        tenant_bucket = f"{tenant_namespace('tw', 'acme')}:b:tokens"
        level, _ = await admitters[0].shared.store.value(tenant_bucket)
        assert level == (1_000_000 - (16 + REQUESTS) * TOKENS) * SCALE   # the plan's limit drew on both
    finally:
        for admitter in admitters:
            await admitter.close()


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_concurrent_requests_hold_the_keys_daily_spend_cap_exactly(kind, request):
    server = request.getfixturevalue("redis_server") if kind == "redis" else None
    clock = FakeClock()
    admitters = await _admitters(kind, server, clock)
    limits = KeyLimits(daily_spend_usd=0.0105, monthly_spend_usd=1.0)   # 10,500 micro-USD: 10 requests fit
    try:
        decisions = await asyncio.gather(*(_reserve(admitters[i % len(admitters)], "kS", limits)
                                           for i in range(REQUESTS)))
        admitted = [d for d in decisions if d.admitted]
        assert len(admitted) == 10
        refused = [d for d in decisions if not d.admitted]
        assert {(d.reason, d.limit, d.terminal) for d in refused} == {(Reason.spend_cap, "key_spend_daily", True)}
        budget = admitters[0].budgets.tenant("acme", effective_plan(admitters[0].config, "acme"), "kS", clock.ms,
                                             limits)
        at = budget.names.index("key_spend_daily")
        assert await admitters[0].shared.store.value(budget.layout.checks[at].key) == 10 * COST
        monthly = budget.layout.checks[budget.names.index("key_spend_monthly")].key
        assert await admitters[0].shared.store.value(monthly) == 10 * COST
        # settling on real usage gives back what was not spent: the key can spend it again
        await admitters[0].settle(admitted[0].ticket, TOKENS, COST // 2, "s")
        again = await _reserve(admitters[0], "kS", limits, cost=COST)    # 9,500 + 1,000: the cap, exactly
        assert again.admitted
        assert not (await _reserve(admitters[0], "kS", limits, cost=1)).admitted
        control = await _reserve(admitters[0], "kB", None)
        assert control.admitted
    finally:
        for admitter in admitters:
            await admitter.close()


async def test_the_key_rate_is_the_lower_of_the_plans_per_key_rate_and_the_keys_own():
    cfg = parse_config(CONFIG.replace("daily_spend_usd: 100}", "daily_spend_usd: 100, key_tokens_per_minute: 900}"),
                       environ={})
    admitter = Admitter(cfg, MemoryStore(), clock=FakeClock())
    plan = effective_plan(cfg, "acme")
    own_lower = admitter.budgets.tenant("acme", plan, "k1", 0, KeyLimits(tokens_per_minute=600))
    plan_lower = admitter.budgets.tenant("acme", plan, "k2", 0, KeyLimits(tokens_per_minute=5000))
    rate = {b: b.layout.checks[b.names.index("key_tokens")].p2 for b in (own_lower, plan_lower)}
    assert rate == {own_lower: 600, plan_lower: 900}
    await admitter.close()
