"""The key cache: single flight, negative entries, the 1 s cap, invalidation races."""

from __future__ import annotations

import asyncio

import pytest

from tokenward.keys.cache import MISS, KeyCache
from tokenward.keys.last_used import LastUsedBatcher


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class SlowStore:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.gate = asyncio.Event()
        self.values: dict[str, str] = {"a": "entry-a"}

    async def load(self, key_id: str) -> str | None:
        self.calls.append(key_id)
        await self.gate.wait()
        return self.values.get(key_id)


async def test_concurrent_misses_share_one_lookup():
    store, clock = SlowStore(), FakeClock()
    cache = KeyCache(store.load, ttl_s=1.0, clock=clock)
    waiting = [asyncio.ensure_future(cache.load("a")) for _ in range(50)]
    await asyncio.sleep(0)
    store.gate.set()
    assert await asyncio.gather(*waiting) == ["entry-a"] * 50
    assert store.calls == ["a"]
    assert cache.fresh("a") == "entry-a"


async def test_unknown_ids_are_cached_as_none_and_ttl_is_capped_at_one_second():
    store, clock = SlowStore(), FakeClock()
    store.gate.set()
    cache = KeyCache(store.load, ttl_s=30.0, clock=clock)
    assert cache.ttl_s == 1.0  # no invalidation channel: revocation must land within 1 s
    assert await cache.load("nope") is None
    assert cache.fresh("nope") is None
    clock.now += 0.99
    assert cache.fresh("nope") is None
    clock.now += 0.02
    assert cache.fresh("nope") is MISS
    cache.set_invalidation_live(True)
    assert cache.ttl_s == 30.0
    cache.set_invalidation_live(False)
    assert cache.ttl_s == 1.0


async def test_an_invalidation_during_a_lookup_is_not_overwritten_by_stale_data():
    store, clock = SlowStore(), FakeClock()
    cache = KeyCache(store.load, ttl_s=1.0, clock=clock)
    pending = asyncio.ensure_future(cache.load("a"))
    await asyncio.sleep(0)
    cache.invalidate("a")  # the key changed while the read was in flight
    store.gate.set()
    assert await pending == "entry-a"
    assert cache.fresh("a") is MISS


async def test_a_cancelled_caller_does_not_cancel_the_others():
    store, clock = SlowStore(), FakeClock()
    cache = KeyCache(store.load, ttl_s=1.0, clock=clock)
    first = asyncio.ensure_future(cache.load("a"))
    second = asyncio.ensure_future(cache.load("a"))
    await asyncio.sleep(0)
    first.cancel()
    store.gate.set()
    assert await second == "entry-a"
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_cache_size_is_bounded():
    store, clock = SlowStore(), FakeClock()
    store.gate.set()
    cache = KeyCache(store.load, ttl_s=1.0, max_entries=10, clock=clock)
    for i in range(35):
        await cache.load(f"id{i}")
    assert len(cache) <= 10


async def test_last_used_is_written_in_batches():
    writes: list[dict] = []

    async def write(batch: dict) -> None:
        writes.append(batch)

    batcher = LastUsedBatcher(write, interval_s=0.05)
    batcher.start()
    for i in range(1000):
        batcher.touch(f"k{i % 3}", float(i))
    await asyncio.sleep(0.12)
    assert writes == [{"k0": 999.0, "k1": 997.0, "k2": 998.0}]
    batcher.touch("k0", 2000.0)
    await batcher.close()
    assert writes[-1] == {"k0": 2000.0} and len(writes) == 2
