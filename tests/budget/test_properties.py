"""Property tests: random reservations, settles and clock moves against random budgets.

Invariants after every step: bucket balances never negative and never above capacity,
gauges never negative and never above an enforced limit, spend never negative; a second
settle of the same reservation changes nothing; a refund is exact to the token. And the
Redis store, running the Lua mirror of the arithmetic, agrees with the pure policy to the
last scaled unit on every answer and every stored value.
"""

from __future__ import annotations

import itertools
import time
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenward.budget import policy
from tokenward.budget.memory import MemoryStore
from tokenward.budget.policy import BUCKET, GAUGE, SCALE, SOFT
from tokenward.budget.redis import RedisStore
from tokenward.budget.store import SETTLED, UNKNOWN, Layout

from .conftest import FakeClock
from .helpers import COST, REQUEST, TOKENS, bucket, gauge, reserve, settle, soft, spend

_names = itertools.count()


@st.composite
def layouts(draw) -> Layout:
    ns = f"tw:{{t:{uuid.uuid4().hex[:12]}}}"
    checks = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["bucket", "gauge", "spend", "pair"]))
        enforce = draw(st.sampled_from([1, 1, 1, 0]))
        name = f"c{next(_names)}"
        if kind == "bucket":
            unit = draw(st.sampled_from([TOKENS, TOKENS, COST, REQUEST]))
            checks.append(bucket(name, draw(st.integers(1, 5000)), unit, enforce, ns))
        elif kind == "gauge":
            checks.append(gauge(name, draw(st.integers(1, 4)), draw(st.sampled_from(["s", TOKENS])), enforce, ns))
        elif kind == "spend":
            checks.append(spend(name, draw(st.integers(1, 5000)), 4_000_000_000_000, enforce, ns))
        else:
            checks.append(soft(name + "s", draw(st.integers(1, 2000)), ns))
            checks.append(bucket(name + "p", draw(st.integers(1, 3000)), TOKENS, enforce, ns))
    return Layout(ns, checks)


step = st.one_of(
    st.tuples(st.just("reserve"), st.integers(0, 3000), st.integers(0, 3000)),
    st.tuples(st.just("settle"), st.integers(0, 7), st.integers(0, 4000),
              st.sampled_from([policy.SETTLE, policy.SETTLE, policy.FULL, policy.VOID])),
    st.tuples(st.just("advance"), st.integers(0, 20_000)),
)


def amounts_for(layout: Layout, tokens: int, cost: int) -> list[int]:
    return [tokens if c.unit == TOKENS else cost if c.unit == COST else 1 for c in layout.checks]


async def check_invariants(store, layout: Layout, now_ms: int) -> list:
    values = []
    for c in layout.checks:
        value = await store.value(c.key)
        values.append(value)
        if c.kind in (BUCKET, SOFT):
            if value is not None:
                level = policy.refill(value, c.p1, c.p2, now_ms)[0]
                assert 0 <= level <= c.p1, (c, value)
        else:
            assert value is None or value >= 0, (c, value)
            if c.kind == GAUGE and c.enforce:
                assert value is None or value <= c.p1, (c, value)
    return values


async def run_steps(store, layout: Layout, steps: list, clock: FakeClock) -> list:
    """Apply the steps; return every answer and every stored value along the way."""
    trace: list = []
    held: list[str] = []
    for i, s in enumerate(steps):
        if s[0] == "reserve":
            rid = f"r{i}"
            [out] = await store.reserve([reserve(layout, rid, clock.ms, amounts_for(layout, s[1], s[2]))])
            trace.append(out)
            if out.ok:
                held.append(rid)
        elif s[0] == "settle" and held:
            rid = held.pop(s[1] % len(held))
            call = settle(layout, rid, clock.ms, tokens=s[2], cost=s[2], mode=s[3])
            assert await store.settle([call]) == [SETTLED]
            before = await check_invariants(store, layout, clock.ms)
            assert await store.settle([call]) == [UNKNOWN]          # idempotent
            assert await check_invariants(store, layout, clock.ms) == before
        elif s[0] == "advance":
            clock.advance(s[1] / 1000)
        trace.append(await check_invariants(store, layout, clock.ms))
    for rid in held:
        await store.settle([settle(layout, rid, clock.ms, mode=policy.FULL)])
    for c in layout.checks:
        if c.kind == GAUGE:
            assert await store.value(c.key) is None   # every slot came back
    assert await store.open_reservations(layout.leases_key) == 0
    return trace


@settings(max_examples=150, deadline=None)
@given(layouts(), st.lists(step, max_size=25))
async def test_memory_store_invariants(layout, steps):
    await run_steps(MemoryStore(), layout, steps, FakeClock(1_700_000_000.0))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(layouts(), st.lists(step, max_size=20))
async def test_redis_agrees_with_the_pure_policy(redis_server_session, layout, steps):
    start = float(int(time.time()))
    expected = await run_steps(MemoryStore(), layout, steps, FakeClock(start))
    store = RedisStore(redis_server_session.url, timeout_s=2.0)
    try:
        actual = await run_steps(store, layout, steps, FakeClock(start))
    finally:
        await store.close()
    assert actual == expected


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 100_000), st.integers(0, 100_000), st.integers(0, 100_000), st.integers(0, 120_000))
async def test_refunds_are_exact_to_the_token(per_minute, reserved, used, elapsed_ms):
    store, clock = MemoryStore(), FakeClock(1_700_000_000.0)
    layout = Layout("tw:{t:p}", [bucket("tokens", per_minute)])
    await store.reserve([reserve(layout, "warm", clock.ms, [per_minute // 2])])
    clock.advance(elapsed_ms / 1000)
    before = policy.refill(await store.value(layout.keys[0]), layout.checks[0].p1, per_minute, clock.ms)[0]
    [out] = await store.reserve([reserve(layout, "r", clock.ms, [reserved])])
    if not out.ok:
        assert reserved * SCALE > before
        return
    used = min(used, reserved)
    await store.settle([settle(layout, "r", clock.ms, tokens=used)])
    assert await store.value(layout.keys[0]) == (before - used * SCALE, clock.ms)

