"""Retention: the sweep drops a subject idle for the whole retention (memory store); in
Redis every key of a subject carries the retention as its TTL, refreshed on each write,
and old fields inside a live subject are dropped as they age out. Nothing kept is a raw
address or prompt text."""

from __future__ import annotations

from tokenward.abuse.redis_store import RedisSignalStore
from tokenward.abuse.state import Batch, Params
from tokenward.abuse.store import BandCall, MemorySignalStore, SubjectCall
from tokenward.budget.redis import RedisStore
from tokenward.budget.resp import pack

P = Params(retention_s=2 * 86400, baseline_days=2, min_history_s=0, novelty_s=3600, refusal_minutes=5,
           max_networks=8, max_capabilities=8)
T0 = 1_900_000_000


def _batch(net: str) -> Batch:
    return Batch(1, 10, 0, 0, {net: 1}, {"model:a": 1}, {"r:token_budget": 1})


async def test_memory_sweep_drops_idle_subjects_and_old_networks():
    store = MemorySignalStore()
    await store.observe([SubjectCall("k:old", _batch("n1")), SubjectCall("k:live", _batch("n1"))], T0, P)
    await store.campaign([BandCall("b", "acme\x1fk:old")], T0, 3600, 10)
    await store.observe([SubjectCall("k:live", _batch("n2"))], T0 + 2 * 86400 - 10, P)
    assert await store.sweep(T0 + 2 * 86400 + 1, P) == 1
    assert set(store.subjects) == {"k:live"} and store.bands == {}
    await store.observe([SubjectCall("k:live", _batch("n3"))], T0 + 4 * 86400, P)
    assert set(store.subjects["k:live"].nets) == {"n3"}   # n1 and n2 unseen for the retention


async def test_redis_keys_carry_the_retention_and_no_raw_values(redis_server):
    store = RedisSignalStore(RedisStore(redis_server.url, timeout_s=2.0))
    try:
        await store.observe([SubjectCall("k:abc", _batch("9f2c1e"))], T0, P)
        keys = await store.store.run_keyed([("x", pack(b"KEYS", b"tw:a:*"))])
        assert sorted(k.decode() for k in keys[0]) == ["tw:a:{k:abc}", "tw:a:{k:abc}:c", "tw:a:{k:abc}:e",
                                                       "tw:a:{k:abc}:n"]
        for key in keys[0]:
            [ttl] = await store.store.run_keyed([(key.decode(), pack(b"PTTL", key))])
            assert 0 < ttl <= P.retention_s * 1000
    finally:
        await store.close()
