"""One contract for every cache store: the memory LRU, Redis (a real redis-server) and Redis
Cluster (three real nodes: a tenant's entries share one slot, so a purge walks one node)."""

from __future__ import annotations

import asyncio
import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fixtures.redis_cluster import redis_cluster  # noqa: F401
from tests.fixtures.redis_server import redis_server, redis_server_session  # noqa: F401
from tokenward.cache.key import cache_key, tenant_prefix
from tokenward.cache.store import MemoryCache, RedisCache

KEY = b"k" * 32


@pytest.fixture(params=["memory", "redis", "redis-cluster"])
async def store(request):
    if request.param == "memory":
        cache = MemoryCache(max_entries=1000, max_bytes=1 << 20)
    elif request.param == "redis":
        cache = RedisCache(request.getfixturevalue("redis_server").url, 0.5, KEY)
    else:
        cluster = request.getfixturevalue("redis_cluster")
        cluster.flush()
        cache = RedisCache(cluster.url, 2.0, KEY)
    yield cache
    await cache.close()


async def test_set_get_overwrite_and_missing(store):
    assert await store.get("tw:{t:a}:c:1") is None
    await store.set("tw:{t:a}:c:1", b"one", 60)
    assert await store.get("tw:{t:a}:c:1") == b"one"
    await store.set("tw:{t:a}:c:1", b"uno", 60)
    assert await store.get("tw:{t:a}:c:1") == b"uno"


async def test_entries_expire(store):
    await store.set("tw:{t:a}:c:2", b"brief", 0.1)
    assert await store.get("tw:{t:a}:c:2") == b"brief"
    await asyncio.sleep(0.2)
    assert await store.get("tw:{t:a}:c:2") is None


async def test_purge_takes_one_tenant_only(store):
    for i in range(30):
        await store.set(f"tw:{{t:a}}:c:{i}", b"a", 60)
        await store.set(f"tw:{{t:b}}:c:{i}", b"b", 60)
    assert await store.purge("tw:{t:a}:c:") == 30
    assert await store.get("tw:{t:a}:c:3") is None and await store.get("tw:{t:b}:c:3") == b"b"


async def test_redis_holds_sealed_values_only(request):
    server = request.getfixturevalue("redis_server")
    cache = RedisCache(server.url, 0.5, KEY)
    try:
        await cache.set("tw:{t:a}:c:x", b"the completion text", 60)
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(server.socket_path)
            sock.sendall(b"GET tw:{t:a}:c:x\r\n")
            raw = sock.recv(4096)
        assert b"completion" not in raw and len(raw) > 20
        other = RedisCache(server.url, 0.5, b"o" * 32)   # another key cannot read it: a miss
        assert await other.get("tw:{t:a}:c:x") is None
        await other.close()
    finally:
        await cache.close()


async def test_memory_bounds_evict_the_least_recently_used():
    cache = MemoryCache(max_entries=3, max_bytes=100)
    for key in "abc":
        await cache.set(key, b"x" * 10, 60)
    await cache.get("a")                       # a is now the most recent
    await cache.set("d", b"x" * 10, 60)
    assert await cache.get("b") is None and await cache.get("a") is not None and cache.evictions == 1
    await cache.set("e", b"y" * 95, 60)        # bytes bound
    assert cache.size_bytes() <= 100 and await cache.get("e") is not None


@given(st.lists(st.tuples(st.sampled_from(["put", "get"]), st.sampled_from("abcdefg"), st.integers(1, 40)),
                max_size=60))
@settings(max_examples=300, deadline=None)
def test_memory_store_is_an_lru_bounded_in_entries_and_bytes(steps):
    """The memory store against a plain list model of an LRU: the same answers, the bytes
    it counts are the bytes it holds, and neither bound is ever passed."""
    cache = MemoryCache(max_entries=4, max_bytes=100)
    model: list[tuple[str, bytes]] = []       # least recently used first
    evicted = 0
    for op, key, size in steps:
        held = dict(model)
        if op == "get":
            assert cache.peek(key) == held.get(key)
            if key in held:
                model.remove((key, held[key]))
                model.append((key, held[key]))
            continue
        value = key.encode() * size
        model = [(k, v) for k, v in model if k != key] + [(key, value)]
        while len(model) > 4 or sum(len(v) for _, v in model) > 100:
            model.pop(0)
            evicted += 1
        cache.put(key, value, 60)
        assert len(cache) == len(model) and cache.size_bytes() == sum(len(v) for _, v in model)
        assert cache.evictions == evicted
    for key, value in model:
        assert cache.peek(key) == value


async def test_on_a_cluster_a_tenants_entries_share_one_node(request):
    """The keys the stage makes are hash-tagged per tenant: all of a tenant's entries live on
    the node that owns its slot, so a purge's SCAN on that node finds every one of them, and
    another tenant's entries (in another slot, on another node here) are left alone."""
    cluster = request.getfixturevalue("redis_cluster")
    cluster.flush()
    cache = RedisCache(cluster.url, 2.0, KEY)
    try:
        by_node: dict[int, str] = {}
        for name in ("acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne"):
            by_node.setdefault(cluster.node_of(tenant_prefix("tw", name)), name)
        assert len(by_node) >= 2, "the test needs two tenants on two nodes"
        a, b = list(by_node.values())[:2]
        keys = {tenant: [cache_key(KEY, "tw", tenant, b'{"i":%d}' % i)[0] for i in range(40)] for tenant in (a, b)}
        for tenant, value in ((a, b"a"), (b, b"b")):
            assert all(key.startswith(tenant_prefix("tw", tenant)) for key in keys[tenant])
            for key in keys[tenant]:
                await cache.set(key, value, 60)
        assert {cluster.node_of(key) for key in keys[a]} == {cluster.node_of(tenant_prefix("tw", a))}
        assert await cache.purge(tenant_prefix("tw", a)) == 40
        assert await cache.get(keys[a][7]) is None
        assert await cache.get(keys[b][7]) == b"b"
        assert await cache.purge(tenant_prefix("tw", b)) == 40
    finally:
        await cache.close()
