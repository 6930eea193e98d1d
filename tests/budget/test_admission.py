"""The Admitter: limits from plans, answers, shadow mode, capacity shares, failure policy, leases."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from tokenward.budget import policy
from tokenward.budget.admission import Admitter
from tokenward.budget.guard import Breaker
from tokenward.budget.limits import tenant_namespace
from tokenward.budget.memory import MemoryStore
from tokenward.budget.policy import SCALE
from tokenward.budget.store import StoreUnavailable
from tokenward.config.loader import effective_plan, parse_config
from tokenward.errors import ConfigError, Reason

CONFIG = """
upstreams: {local: {base_url: "http://127.0.0.1:1/v1"}}
models:
  small-chat: {upstream: local, input_price_per_million: 1.0, output_price_per_million: 2.0}
plans:
  team:
    models: [small-chat]
    tokens_per_minute: 6000
    requests_per_minute: 600
    max_concurrent_streams: 3
    daily_spend_usd: 0.01
  free:
    models: [small-chat]
    tokens_per_minute: 1200
    requests_per_minute: 60
    max_concurrent_streams: 1
  bulk: {models: [small-chat], tokens_per_minute: 100000, max_concurrent_streams: 100}
tenants:
  acme: {plan: team}
  globex: {plan: free}
  initech: {plan: free}
  hooli: {plan: bulk}
store: {lease_s: 3, fail_open_tiers: [free], fail_open_fraction: 0.5}
"""


def config(extra: str = ""):
    return parse_config(CONFIG + extra, environ={})


class Flaky:
    """A store that can be switched off: every call raises StoreUnavailable while down."""

    name = "flaky"

    def __init__(self) -> None:
        self.inner = MemoryStore()
        self.down = False
        self.calls = 0

    def __getattr__(self, attr):
        inner = getattr(self.inner, attr)

        async def call(*args, **kwargs):
            self.calls += 1
            if self.down:
                raise StoreUnavailable("switched off")
            return await inner(*args, **kwargs)

        return call


async def admit(admitter: Admitter, tenant: str = "acme", tokens: int = 1000, cost: int = 1, key: str = "k1"):
    cfg = admitter.config
    return await admitter.reserve(tenant, cfg.tenants[tenant].plan, effective_plan(cfg, tenant), key,
                                  "small-chat", "local", tokens, cost)


@pytest.fixture(params=["memory", "redis"])
async def any_store(request):
    if request.param == "memory":
        yield MemoryStore()
        return
    from tokenward.budget.redis import RedisStore

    server = request.getfixturevalue("redis_server")
    store = RedisStore(server.url, timeout_s=1.0)
    yield store
    await store.close()


async def test_admitted_request_gets_headers_and_settles_with_an_exact_refund(any_store, clock):
    admitter = Admitter(config(), any_store, clock=clock)
    decision = await admit(admitter, tokens=1000)
    assert decision.admitted and decision.limits == ("spend_daily", "streams", "tokens", "requests")
    headers = dict(decision.headers)
    assert headers[b"x-ratelimit-limit-tokens"] == b"6000"
    assert headers[b"x-ratelimit-remaining-tokens"] == b"5000"
    assert headers[b"x-ratelimit-reset-tokens"] == b"10s"        # 1000 tokens at 100/s
    assert headers[b"x-ratelimit-limit-requests"] == b"600"
    assert headers[b"x-ratelimit-remaining-requests"] == b"599"
    assert await admitter.settle(decision.ticket, 120, 1, policy.SETTLE)
    assert not await admitter.settle(decision.ticket, 120, 1, policy.SETTLE)   # idempotent
    ns = tenant_namespace("tw", "acme")
    assert await any_store.value(ns + ":b:tokens") == ((6000 - 120) * SCALE, clock.ms)
    assert await any_store.value(ns + ":g:streams") is None
    assert await any_store.open_reservations(ns + ":leases") == 0
    await admitter.close()


async def test_token_budget_refusal_has_an_honest_retry_after(any_store, clock):
    admitter = Admitter(config(), any_store, clock=clock)
    first = await admit(admitter, "globex", tokens=1000)
    await admitter.settle(first.ticket, 1000, 1, policy.SETTLE)
    # free: 1200 tokens/min = 20/s; 200 left, 500 needed -> 15 s
    refused = await admit(admitter, "globex", tokens=500)
    assert refused.reason is Reason.token_budget and refused.retry_after == 15 and not refused.terminal
    clock.advance(14)
    assert (await admit(admitter, "globex", tokens=500)).reason is Reason.token_budget
    clock.advance(1)
    ok = await admit(admitter, "globex", tokens=500)
    assert ok.admitted
    await admitter.settle(ok.ticket, 0, 0, policy.SETTLE)
    assert await any_store.open_reservations(tenant_namespace("tw", "globex") + ":leases") == 0
    await admitter.close()


async def test_open_streams_are_a_concurrency_limit(any_store, clock):
    admitter = Admitter(config(), any_store, clock=clock)
    held = await admit(admitter, "globex", tokens=10)
    refused = await admit(admitter, "globex", tokens=10)
    assert refused.reason is Reason.concurrency_limit and refused.retry_after is None and not refused.terminal
    await admitter.settle(held.ticket, 1, 0, policy.SETTLE)
    assert (await admit(admitter, "globex", tokens=10)).admitted
    await admitter.close()


async def test_more_than_the_budget_holds_is_terminal(clock):
    admitter = Admitter(config(), MemoryStore(), clock=clock)
    refused = await admit(admitter, "globex", tokens=1201)
    assert refused.reason is Reason.token_budget and refused.retry_after is None and refused.terminal


async def test_spend_cap_is_terminal(clock):
    admitter = Admitter(config(), MemoryStore(), clock=clock)
    first = await admit(admitter, tokens=10, cost=6000)   # 6000 micro-USD of a 10000 cap
    assert first.admitted
    refused = await admit(admitter, tokens=10, cost=6000)
    assert refused.reason is Reason.spend_cap and refused.terminal and refused.retry_after is None
    await admitter.settle(first.ticket, 10, 100, policy.SETTLE)   # it really cost 100
    assert (await admit(admitter, tokens=10, cost=6000)).admitted


async def test_shadow_limits_record_would_reject_without_refusing(clock):
    admitter = Admitter(config(), MemoryStore(), clock=clock)
    cfg = admitter.config
    plan = msgspec.structs.replace(effective_plan(cfg, "globex"), shadow=("streams", "tokens"))
    first = await admitter.reserve("globex", "free", plan, "k", "small-chat", "local", 1000, 0)
    second = await admitter.reserve("globex", "free", plan, "k", "small-chat", "local", 1000, 0)
    assert first.admitted and second.admitted
    assert second.shadow == ("streams", "tokens")


async def test_per_key_limits_live_inside_the_tenant_namespace(clock):
    admitter = Admitter(config(), MemoryStore(), clock=clock)
    plan = msgspec.structs.replace(effective_plan(admitter.config, "acme"), key_requests_per_minute=1,
                                   daily_spend_usd=None)
    a = await admitter.reserve("acme", "team", plan, "key-a", None, None, 10, 0)
    b = await admitter.reserve("acme", "team", plan, "key-b", None, None, 10, 0)
    again = await admitter.reserve("acme", "team", plan, "key-a", None, None, 10, 0)
    assert a.admitted and b.admitted
    assert again.reason is Reason.rate_limited and again.limit == "key_requests" and again.retry_after == 60


CAPACITY = """
capacity:
  local: {tokens_per_minute: 10000, shares: {acme: 0.3}}
"""


async def test_a_burst_cannot_take_a_tenants_guaranteed_share(any_store, clock):
    admitter = Admitter(config(CAPACITY), any_store, clock=clock)
    # hooli (no share) bursts: it may take the shared reserve (7000 of 10000) and no more
    burst = [await admit(admitter, "hooli", tokens=1000, key=f"h{i}") for i in range(8)]
    assert [d.admitted for d in burst] == [True] * 7 + [False]
    assert burst[-1].reason is Reason.token_budget and burst[-1].limit == "capacity"
    assert burst[-1].retry_after == 9   # 1000 tokens of a pool refilling 7000/min: 8.6 s, rounded up
    pool_before = await any_store.value("tw:{u:local}:c:pool")
    # acme still gets its whole guaranteed 3000, without touching the pool
    share = await admit(admitter, "acme", tokens=3000, cost=1)
    assert share.admitted
    assert await any_store.value("tw:{u:local}:c:pool") == pool_before
    assert await any_store.open_reservations("tw:{u:local}:leases") == 8
    # the refused one left nothing behind in its tenant namespace (voided at once)
    assert await any_store.open_reservations(tenant_namespace("tw", "hooli") + ":leases") == 7
    for d in burst[:7] + [share]:
        await admitter.settle(d.ticket, 10, 0, policy.SETTLE)
    assert await any_store.open_reservations("tw:{u:local}:leases") == 0
    await admitter.close()


async def test_tenant_refusal_voids_the_capacity_half(any_store, clock):
    admitter = Admitter(config(CAPACITY), any_store, clock=clock)
    refused = await admit(admitter, "globex", tokens=1201)
    assert refused.limit == "tokens"
    assert await any_store.open_reservations("tw:{u:local}:leases") == 0
    assert await any_store.value("tw:{u:local}:c:pool") in (None, (7000 * SCALE, clock.ms))
    await admitter.close()


def test_capacity_config_errors_name_the_path():
    with pytest.raises(ConfigError, match="capacity.local.shares"):
        Admitter(config("capacity:\n  local: {tokens_per_minute: 100, shares: {acme: 0.6, globex: 0.5}}\n"),
                 MemoryStore())
    with pytest.raises(ConfigError, match="capacity.nowhere"):
        Admitter(config("capacity:\n  nowhere: {tokens_per_minute: 100}\n"), MemoryStore())


async def test_unreachable_store_fails_closed_and_open_only_for_open_tiers(clock):
    store = Flaky()
    breaker_clock = [0.0]
    # opens on the first failure here (the default waits for 5 in a row: tests/budget/test_breaker.py)
    admitter = Admitter(config(), store, clock=clock, breaker=Breaker(lambda: breaker_clock[0], failures=1))
    store.down = True
    closed = await admit(admitter, "acme")
    assert closed.reason is Reason.budget_store_unavailable and not closed.admitted
    calls = store.calls
    assert (await admit(admitter, "acme")).reason is Reason.budget_store_unavailable
    assert store.calls == calls  # the breaker fails fast: no call, no timeout to wait out
    # free is configured to fail open: a local limiter with half of each limit (600 tokens/min)
    local = await admit(admitter, "globex", tokens=600)
    assert local.admitted and local.local
    assert (await admit(admitter, "initech", tokens=601)).reason is Reason.token_budget
    await admitter.settle(local.ticket, 10, 0, policy.SETTLE)
    # recovery is automatic once the store answers and the backoff has passed
    store.down = False
    breaker_clock[0] += 5
    recovered = await admit(admitter, "acme")
    assert recovered.admitted and not recovered.local
    await admitter.close()


async def test_settles_missed_during_an_outage_are_finished_later(clock):
    store = Flaky()
    breaker_clock = [0.0]
    admitter = Admitter(config(), store, clock=clock, breaker=Breaker(lambda: breaker_clock[0]))
    decision = await admit(admitter, "acme", tokens=1000)
    store.down = True
    await admitter.settle(decision.ticket, 100, 0, policy.SETTLE)
    assert len(admitter.keeper.pending) == 1
    store.down = False
    breaker_clock[0] += 5
    await admitter.keeper.tick()
    assert admitter.keeper.pending == []
    ns = tenant_namespace("tw", "acme")
    assert await store.inner.open_reservations(ns + ":leases") == 0
    assert (await store.inner.value(ns + ":b:tokens"))[0] == (6000 - 100) * SCALE
    await admitter.close()


async def test_a_dead_replicas_reservation_is_reconciled_after_its_lease(any_store, clock):
    dead = Admitter(config(), any_store, clock=clock)
    held = await admit(dead, "acme", tokens=1000)
    assert held.admitted
    alive = Admitter(config(), any_store, clock=clock)
    await alive.keeper.tick()          # a replica that has been up for a while
    await dead.keeper.close()          # the replica dies: nobody renews its lease
    ns = tenant_namespace("tw", "acme")
    clock.advance(2)
    await alive.keeper.tick()
    assert await any_store.open_reservations(ns + ":leases") == 1   # lease (3 s) not yet expired
    clock.advance(1.5)
    await alive.keeper.tick()
    assert await any_store.open_reservations(ns + ":leases") == 0
    assert await any_store.value(ns + ":g:streams") is None
    level = (await any_store.value(ns + ":b:tokens"))[0]
    assert level == 5000 * SCALE + 3500 * 6000  # charged in full, then refilled for 3.5 s at 6000/min
    await alive.close()


async def test_open_reservations_are_renewed_by_one_background_task(any_store, clock):
    admitter = Admitter(config(), any_store, clock=clock)
    held = [await admit(admitter, "acme", tokens=10, key=f"k{i}") for i in range(3)]
    assert admitter.keeper._task is not None
    clock.advance(2.5)
    await admitter.keeper.tick()       # renews: the leases now run to now + 3 s
    clock.advance(2.5)
    other = Admitter(config(), any_store, clock=clock)
    await other.keeper.tick()          # another replica's reconciler finds nothing expired
    ns = tenant_namespace("tw", "acme")
    assert await any_store.open_reservations(ns + ":leases") == 3
    for d in held:
        await admitter.settle(d.ticket, 1, 0, policy.SETTLE)
    assert await any_store.open_reservations(ns + ":leases") == 0
    await admitter.close()
    await other.close()


async def test_after_an_outage_longer_than_a_lease_a_live_stream_is_renewed_not_reconciled(clock):
    """Every lease expires during a long outage; when the store returns, a replica whose
    tick comes first must not settle another live replica's reservation as dead."""
    store = Flaky()
    breaker_clock = [0.0]
    owner = Admitter(config(), store, clock=clock, breaker=Breaker(lambda: breaker_clock[0]))
    other = Admitter(config(), store, clock=clock, breaker=Breaker(lambda: breaker_clock[0]))
    held = await admit(owner, "acme", tokens=1000)
    ns = tenant_namespace("tw", "acme")
    for keeper in (owner.keeper, other.keeper):
        await keeper.tick()
    store.down = True
    for _ in range(5):                 # 5 s down, the lease is 3 s: ticks fail on both replicas
        clock.advance(1)
        breaker_clock[0] += 5
        for keeper in (other.keeper, owner.keeper):
            await keeper.tick()
    store.down = False
    breaker_clock[0] += 5
    await other.keeper.tick()          # the other replica happens to tick first: it only looks
    assert await store.inner.open_reservations(ns + ":leases") == 1
    for _ in range(4):
        clock.advance(1)
        await owner.keeper.tick()      # renews its own
        await other.keeper.tick()      # reconciles again after 3 s of answers: nothing expired
    assert await store.inner.open_reservations(ns + ":leases") == 1
    assert await store.inner.value(ns + ":g:streams") == 1
    assert await owner.settle(held.ticket, 100, 0, policy.SETTLE)
    assert await store.inner.open_reservations(ns + ":leases") == 0
    assert await store.inner.value(ns + ":g:streams") is None
    await owner.close()
    await other.close()


class Slow(Flaky):
    """A store whose reserve answers only after a while (the request may be cancelled meanwhile)."""

    def __getattr__(self, attr):
        inner = super().__getattr__(attr)
        if attr != "reserve":
            return inner

        async def slow(*args):
            result = await inner(*args)   # applied at once, answered late
            await asyncio.sleep(10)
            return result

        return slow


async def test_a_reservation_cancelled_in_flight_is_voided_and_frees_the_breaker(clock):
    store = Slow()
    breaker_clock = [0.0]
    breaker = Breaker(lambda: breaker_clock[0])
    admitter = Admitter(config(), store, clock=clock, breaker=breaker)
    task = asyncio.ensure_future(admit(admitter, "acme", tokens=1000))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.01)
    ns = tenant_namespace("tw", "acme")
    assert await store.inner.open_reservations(ns + ":leases") == 0
    assert await store.inner.value(ns + ":g:streams") is None
    # a probe cancelled while the breaker was half-open does not wedge it
    breaker.failure()
    breaker_clock[0] += 5
    assert breaker.allow()
    breaker.abandon()
    assert breaker.allow()
    await admitter.close()


async def test_warm_loads_the_scripts_and_a_dead_store_does_not_stop_start_up(redis_server, clock, tmp_path, caplog):
    """Start-up gets the store ready (scripts loaded before the first request); a store
    that does not answer yet only logs: requests fail closed until it does."""
    from tokenward.budget.redis import RESERVE, SETTLE, RedisStore
    from tokenward.budget.resp import pack

    store = RedisStore(redis_server.url, timeout_s=1.0)
    await store._run(pack(b"SCRIPT", b"FLUSH"), 1)
    admitter = Admitter(config(), store, clock=clock)
    await admitter.warm()
    assert await store._run(pack(b"SCRIPT", b"EXISTS", RESERVE.sha, SETTLE.sha), 1) == [[1, 1]]
    await admitter.close()

    dead = Admitter(config(), RedisStore(f"unix://{tmp_path}/nothing.sock", timeout_s=0.2), clock=clock)
    await dead.warm()
    assert "budget store not reachable at start-up" in caplog.text
    decision = await admit(dead)
    assert not decision.admitted and decision.reason is Reason.budget_store_unavailable
    await dead.close()


async def test_settles_of_one_loop_pass_go_to_redis_in_one_round_trip(redis_server, clock):
    from tokenward.budget.redis import RedisStore

    store = RedisStore(redis_server.url, timeout_s=1.0)
    admitter = Admitter(config(), store, clock=clock)
    held = [await admit(admitter, tenant="hooli", tokens=100) for _ in range(8)]
    ns = tenant_namespace("tw", "hooli")
    assert await store.open_reservations(ns + ":leases") == 8
    before = store.round_trips
    assert all(admitter.settle_soon(d.ticket, 40, 0, policy.SETTLE) for d in held)
    assert not admitter.settle_soon(held[0].ticket, 40, 0, policy.SETTLE)        # once per ticket
    assert store.round_trips == before                                          # nothing sent yet
    for _ in range(20):
        await asyncio.sleep(0)
        if not admitter._background and store.round_trips > before:
            break
    assert store.round_trips == before + 1                                      # eight settles, one trip
    assert await store.open_reservations(ns + ":leases") == 0
    level, _ = await store.value(ns + ":b:tokens")
    assert level == (100_000 - 8 * 40) * SCALE                                  # each refunded to the token
    await admitter.close()


async def test_close_sends_the_settles_still_waiting_for_the_loop(redis_server, clock):
    from tokenward.budget.redis import RedisStore

    store = RedisStore(redis_server.url, timeout_s=1.0)
    admitter = Admitter(config(), store, clock=clock)
    decision = await admit(admitter, tenant="hooli", tokens=100)
    admitter.settle_soon(decision.ticket, 0, 0, policy.SETTLE)
    await admitter.close()                           # before the loop ran the batch
    check = RedisStore(redis_server.url, timeout_s=1.0)
    assert await check.open_reservations(tenant_namespace("tw", "hooli") + ":leases") == 0
    await check.close()


async def test_a_batched_settle_that_fails_is_retried_by_the_keeper(clock):
    flaky = Flaky()
    admitter = Admitter(config(), flaky, clock=clock, breaker=Breaker(clock=lambda: clock.now))
    decision = await admit(admitter, tenant="hooli", tokens=100)
    flaky.down = True
    assert admitter.settle_soon(decision.ticket, 10, 0, policy.SETTLE)
    while admitter._background or admitter._settles:
        await asyncio.sleep(0)
    assert len(admitter.keeper.pending) == 1                                    # kept, not lost
    flaky.down = False
    clock.advance(5)
    await admitter.keeper.tick()
    assert not admitter.keeper.pending
    assert await flaky.inner.open_reservations(tenant_namespace("tw", "hooli") + ":leases") == 0
