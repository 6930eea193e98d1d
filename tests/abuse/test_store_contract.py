"""The memory store (abuse/state.py) and Redis (lua/*.lua) give the same answers to the same
observations, on a single server and on a Redis Cluster; memory per subject stays bounded."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenward.abuse.redis_store import RedisSignalStore
from tokenward.abuse.state import Batch, Params, SubjectState, update
from tokenward.abuse.store import BandCall, MemorySignalStore, SubjectCall
from tokenward.budget.redis import RedisStore
from tests.fixtures.redis_cluster import redis_cluster  # noqa: F401

P = Params(retention_s=3 * 86400, baseline_days=2, min_history_s=86400, novelty_s=3600, refusal_minutes=5,
           max_networks=4, max_capabilities=3)
T0 = 1_800_000_000 - 1_800_000_000 % 86400

names = st.sampled_from(["n1", "n2", "n3", "n4", "n5", "n6"])
batches = st.builds(
    Batch, requests=st.integers(0, 50), output=st.integers(0, 5000), at_max=st.integers(0, 5),
    refusals=st.integers(0, 20), networks=st.dictionaries(names, st.integers(1, 5), max_size=3),
    capabilities=st.dictionaries(st.sampled_from(["model:a", "model:b", "tools", "stream", "model:c"]),
                                 st.integers(1, 5), max_size=3),
    events=st.dictionaries(st.sampled_from(["r:token_budget", "r:content_blocked", "s:pii:log"]),
                           st.integers(1, 9), max_size=2))
steps = st.lists(st.tuples(st.integers(0, 40_000), st.sampled_from(["k:a", "k:b", "t:acme"]), batches),
                 min_size=1, max_size=25)


async def _replay(store, plan):
    now, out = T0, []
    for gap, subject, batch in plan:
        now += gap
        out.append(tuple(await store.observe([SubjectCall(subject, batch)], now, P)))
    events = await store.events(["acme"], now, 300)
    return out, events


@pytest.fixture(params=["redis", "redis-cluster"])
def redis_url(request):
    if request.param == "redis":
        return request.getfixturevalue("redis_server").url
    cluster = request.getfixturevalue("redis_cluster")
    return cluster.url


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(plan=steps)
def test_redis_and_memory_agree(redis_url, plan):
    async def run():
        redis = RedisSignalStore(RedisStore(redis_url, timeout_s=2.0), prefix=f"t{abs(hash(str(plan))) % 10**9}")
        try:
            return await _replay(MemorySignalStore(), plan), await _replay(redis, plan)
        finally:
            await redis.close()

    memory, redis = asyncio.run(run())
    assert memory == redis


@settings(max_examples=60, deadline=None)
@given(plan=steps)
def test_state_per_subject_is_bounded(plan):
    state, now = SubjectState(), T0
    for gap, _, batch in plan:
        now += gap
        update(state, batch, now, P)
        assert len(state.nets) <= P.max_networks
        assert len(state.caps) <= P.max_capabilities
        assert len(state.days) <= P.retention_s // 86400 + 2
        assert len(state.events) <= 61 * 3


async def test_a_network_is_new_only_for_a_subject_with_history():
    store = MemorySignalStore()
    fresh = Batch(1, 10, 0, 0, {"home": 1}, {}, {})
    [raw] = await store.observe([SubjectCall("k:a", fresh)], T0, P)
    assert raw.hour_new_network == 0 and raw.trusted == 0          # a key's first networks are learned
    [raw] = await store.observe([SubjectCall("k:a", Batch(1, 10, 0, 0, {"away": 2}, {}, {}))], T0 + 2 * 86400, P)
    assert raw.hour_new_network == 2 and raw.trusted == 1
    [raw] = await store.observe([SubjectCall("k:a", Batch(1, 10, 0, 0, {"home": 1}, {}, {}))], T0 + 2 * 86400 + 60, P)
    assert raw.hour_new_network == 2                                # home is not new; the hour keeps its count
    [raw] = await store.observe([SubjectCall("k:a", Batch(1, 10, 0, 0, {"away": 1}, {}, {}))], T0 + 3 * 86400, P)
    assert raw.hour_new_network == 0                                # known for more than novelty_s now


async def test_campaign_counts_keys_and_tenants(redis_server):
    stores = [MemorySignalStore(), RedisSignalStore(RedisStore(redis_server.url, timeout_s=2.0))]
    for store in stores:
        calls = [BandCall("b1", f"acme\x1fk{i}") for i in range(5)] + [BandCall("b1", "globex\x1fk9")]
        answers = await store.campaign(calls, T0, 3600, 100)
        assert answers[-1][:2] == (6, 2) and set(answers[-1].members) == {c.member for c in calls}
        assert [a[:2] for a in await store.campaign([BandCall("b1", "acme\x1fk0")], T0 + 4000, 3600, 100)] == [(1, 1)]
        await store.close()


async def test_slots(redis_server):
    for store in (MemorySignalStore(), RedisSignalStore(RedisStore(redis_server.url, timeout_s=2.0))):
        now = T0 * 1000
        assert await store.take_slot("k", "r1", 1, now, 60_000)
        assert not await store.take_slot("k", "r2", 1, now, 60_000)
        await store.give_slot("k", "r1")
        assert await store.take_slot("k", "r2", 1, now, 60_000)
        assert await store.take_slot("k", "r3", 1, now + 61_000, 60_000)   # r2's lease ran out
        assert await store.shared_secret(b"a" * 32) == await store.shared_secret(b"b" * 32) == b"a" * 32
        await store.close()
