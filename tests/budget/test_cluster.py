"""The Redis store on a real three-node Redis Cluster: each call runs on the node that
owns its namespace's slot, and the store follows the cluster when slots move."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.budget.helpers import bucket, gauge, reserve, settle
from tests.fixtures.redis_cluster import _command, private_cluster
from tokenward.budget.cluster import SLOTS, key_slot
from tokenward.budget.limits import tenant_namespace
from tokenward.budget.redis import RESERVE, SETTLE, RedisStore
from tokenward.budget.store import SETTLED, Layout, StoreUnavailable


@pytest.fixture
async def cluster_store(redis_cluster):
    redis_cluster.flush()
    store = RedisStore(redis_cluster.url, timeout_s=1.0)
    yield store
    await store.close()


def layout_for(tenant: str) -> Layout:
    ns = tenant_namespace("tw", tenant)
    return Layout(ns, [bucket("tokens", 1000, ns=ns), gauge("streams", 5, ns=ns)])


def tenants_on_every_node(cluster) -> dict[int, str]:
    """One tenant name per node, found by asking the cluster where each namespace lives."""
    found: dict[int, str] = {}
    for i in range(200):
        tenant = f"tenant{i}"
        found.setdefault(cluster.node_of(tenant_namespace("tw", tenant)), tenant)
        if len(found) == len(cluster.ports):
            return found
    raise AssertionError("no namespace found on some node")


async def test_concurrent_first_calls_share_one_look_at_the_cluster(redis_cluster):
    """A replica's first burst: every call waits for the one CLUSTER SLOTS, none is cut off
    when the seed connection closes (a 503 in a cold replica's first second before)."""
    redis_cluster.flush()
    store = RedisStore(redis_cluster.url, timeout_s=1.0)
    tenants = tenants_on_every_node(redis_cluster)
    layouts = [layout_for(tenant) for tenant in tenants.values()]
    calls = []
    for i in range(60):     # arriving one after another, as a burst does, not all in one loop pass
        calls.append(asyncio.ensure_future(store.reserve([reserve(layouts[i % len(layouts)], f"r{i}",
                                                                  1_700_000_000_000, [1, 0])])))
        await asyncio.sleep(0.0002)
    outcomes = await asyncio.gather(*calls)
    assert all(o.ok for [o] in outcomes)
    await store.close()


def test_key_slot_matches_the_cluster(redis_cluster):
    for key in ("tw:{t:acme}", "tw:{t:acme}:leases", "plain", "{}odd", "a{b}c{d}"):
        assert key_slot(key.encode()) == int(_command(redis_cluster.ports[0], "CLUSTER", "KEYSLOT", key))


async def test_one_batch_runs_on_every_node_each_call_where_its_namespace_lives(redis_cluster, cluster_store):
    tenants = tenants_on_every_node(redis_cluster)
    layouts = {port: layout_for(tenant) for port, tenant in tenants.items()}
    outcomes = await cluster_store.reserve([reserve(layout, f"r{port}", 1_700_000_000_000, [100, 1])
                                            for port, layout in layouts.items()])
    assert [o.ok for o in outcomes] == [True] * len(layouts)
    for port, layout in layouts.items():
        assert _command(port, "EXISTS", layout.namespace).strip() == "1"       # on its owner
        others = [p for p in redis_cluster.ports if p != port]
        assert all(_command(p, "EXISTS", layout.namespace).startswith("MOVED") for p in others)
    assert await cluster_store.settle([settle(layout, f"r{port}", 1_700_000_000_000, tokens=40)
                                       for port, layout in layouts.items()]) == [SETTLED] * len(layouts)
    for layout in layouts.values():
        assert await cluster_store.value(layout.keys[0]) == ((1000 - 40) * 60_000, 1_700_000_000_000)
        assert await cluster_store.open_reservations(layout.leases_key) == 0


async def test_a_stale_slot_map_is_refreshed_when_a_node_answers_moved(redis_cluster, cluster_store):
    tenants = tenants_on_every_node(redis_cluster)
    layout = layout_for(tenants[redis_cluster.ports[1]])
    assert (await cluster_store.reserve([reserve(layout, "warm", 1_700_000_000_000, [1, 1])]))[0].ok
    router = cluster_store._cluster
    assert router is not None
    router._owner = [("127.0.0.1", redis_cluster.ports[0])] * SLOTS     # every slot on the wrong node
    assert (await cluster_store.reserve([reserve(layout, "after", 1_700_000_000_000, [1, 1])]))[0].ok
    assert router._owner[key_slot(layout.namespace.encode())] == ("127.0.0.1", redis_cluster.ports[1])


async def test_a_slot_being_migrated_is_followed_with_asking_and_then_moved(redis_cluster, cluster_store):
    tenants = tenants_on_every_node(redis_cluster)
    source, target = redis_cluster.ports[0], redis_cluster.ports[1]
    layout = layout_for(tenants[source])
    slot = key_slot(layout.namespace.encode())
    source_id, target_id = (_command(p, "CLUSTER", "MYID").strip() for p in (source, target))
    assert (await cluster_store.reserve([reserve(layout, "held", 1_700_000_000_000, [1, 1])]))[0].ok
    assert _command(target, "CLUSTER", "SETSLOT", str(slot), "IMPORTING", source_id).strip() == "OK"
    assert _command(source, "CLUSTER", "SETSLOT", str(slot), "MIGRATING", target_id).strip() == "OK"
    try:
        # the leases key went first; the namespace's hash has not moved yet
        moved = _command(source, "MIGRATE", "127.0.0.1", str(target), "", "0", "5000", "KEYS", layout.leases_key)
        assert moved.strip() == "OK"
        # a one-key call follows ASK to the target, where the leases now are
        assert await cluster_store.open_reservations(layout.leases_key) == 1
        # a script whose keys are split between the two nodes is refused, never run half
        # here and half there: after a few TRYAGAINs the store counts as unavailable
        with pytest.raises(StoreUnavailable):
            await cluster_store.settle([settle(layout, "held", 1_700_000_000_000)])
        moved = _command(source, "MIGRATE", "127.0.0.1", str(target), "", "0", "5000", "KEYS", layout.namespace)
        assert moved.strip() == "OK"
        for port in redis_cluster.ports:
            _command(port, "CLUSTER", "SETSLOT", str(slot), "NODE", target_id)
        # the migration is over: MOVED, a fresh slot map, and the settle runs on the target
        assert await cluster_store.settle([settle(layout, "held", 1_700_000_000_000)]) == [SETTLED]
        assert await cluster_store.open_reservations(layout.leases_key) == 0
        assert _command(target, "EXISTS", layout.namespace).strip() == "1"
    finally:
        # hand the slot back so later tests find the cluster as it was (they flush the data)
        for port in redis_cluster.ports:
            _command(port, "CLUSTER", "SETSLOT", str(slot), "NODE", source_id)


async def test_a_node_that_lost_its_scripts_gets_them_again(redis_cluster, cluster_store):
    tenants = tenants_on_every_node(redis_cluster)
    layouts = [layout_for(tenant) for tenant in tenants.values()]
    assert all(o.ok for o in await cluster_store.reserve([reserve(lo, "a", 1_700_000_000_000, [1, 1])
                                                          for lo in layouts]))
    _command(redis_cluster.ports[2], "SCRIPT", "FLUSH")
    assert all(o.ok for o in await cluster_store.reserve([reserve(lo, "b", 1_700_000_000_000, [1, 1])
                                                          for lo in layouts]))
    assert _command(redis_cluster.ports[2], "SCRIPT", "EXISTS", RESERVE.sha.decode()).strip() == "1"


async def test_a_failed_primary_is_replaced_by_its_replica_and_the_store_follows():
    """A primary dies; once the cluster promotes its replica, calls for its slots go to
    the new primary (the slot map is asked again after the node stopped answering) and
    the reservation made before the failure settles there."""
    with private_cluster(nodes=6, replicas=1, node_timeout_ms=1000) as cluster:
        primaries = [p for p in cluster.ports if "master" in _command(p, "ROLE").split()[0]]
        store = RedisStore(cluster.url, timeout_s=0.5)
        victim = next(p for p in primaries if p != cluster.ports[0])
        tenant = next(f"tenant{i}" for i in range(500)
                      if cluster.node_of(tenant_namespace("tw", f"tenant{i}")) == victim)
        layout = layout_for(tenant)
        assert (await store.reserve([reserve(layout, "before", 1_700_000_000_000, [100, 1])]))[0].ok
        # the replica has the reservation before its primary dies: replication is
        # asynchronous, and WAIT from another connection (no writes of its own) answers at
        # once, so the replica's acknowledged offset is watched until it reaches the primary's
        wanted = _replication(victim)["master_repl_offset"]
        deadline = time.monotonic() + 20
        while _replication(victim).get("replica_offset", -1) < wanted:
            assert time.monotonic() < deadline, "the replica never caught up with the reservation"
            await asyncio.sleep(0.05)
        cluster.kill(victim)
        deadline = time.monotonic() + 20
        while True:
            try:
                assert (await store.reserve([reserve(layout, "after", 1_700_000_000_000, [100, 1])]))[0].ok
                break
            except StoreUnavailable:
                assert time.monotonic() < deadline, "the store never found the promoted replica"
                await asyncio.sleep(0.2)
        assert await store.settle([settle(layout, rid, 1_700_000_000_000) for rid in ("before", "after")]) \
            == [SETTLED, SETTLED]
        assert await store.open_reservations(layout.leases_key) == 0
        await store.close()


def _replication(port: int) -> dict[str, int]:
    """A primary's replication offset, and its (first) replica's acknowledged one."""
    out: dict[str, int] = {}
    for line in _command(port, "INFO", "replication").splitlines():
        if line.startswith("master_repl_offset:"):
            out["master_repl_offset"] = int(line.split(":", 1)[1])
        elif line.startswith("slave0:"):
            fields = dict(part.split("=", 1) for part in line.split(":", 1)[1].split(","))
            out["replica_offset"] = int(fields["offset"])
    return out


async def test_a_dead_node_refuses_only_the_tenants_whose_slots_it_holds():
    """Before the cluster notices (node timeout), one primary is gone: its tenants fail
    closed; the others keep being admitted, request after request, though the store's
    breaker would otherwise open on the first failure."""
    from tests.budget.test_admission import config
    from tokenward.budget.admission import Admitter
    from tokenward.config.loader import effective_plan
    from tokenward.errors import Reason

    with private_cluster() as cluster:
        admitter = Admitter(config(), RedisStore(cluster.url, timeout_s=0.5))
        plan = effective_plan(admitter.config, "hooli")     # 100 streams: nothing but the node refuses
        dead_port = cluster.ports[1]
        on_dead = next(f"t{i}" for i in range(500) if cluster.node_of(tenant_namespace("tw", f"t{i}")) == dead_port)
        on_live = next(f"t{i}" for i in range(500) if cluster.node_of(tenant_namespace("tw", f"t{i}")) != dead_port)

        async def admit(tenant: str):
            return await admitter.reserve(tenant, "bulk", plan, "k1", None, None, 100, 1)

        assert (await admit(on_dead)).admitted and (await admit(on_live)).admitted
        cluster.kill(dead_port)
        for _ in range(10):
            refused = await admit(on_dead)
            assert not refused.admitted and refused.reason is Reason.budget_store_unavailable
            assert (await admit(on_live)).admitted
        await admitter.close()


async def test_warm_loads_the_scripts_on_every_primary_before_traffic(redis_cluster):
    for port in redis_cluster.ports:
        _command(port, "SCRIPT", "FLUSH")
    store = RedisStore(redis_cluster.url, timeout_s=1.0)
    await store.warm()
    for port in redis_cluster.ports:
        assert _command(port, "SCRIPT", "EXISTS", RESERVE.sha.decode(), SETTLE.sha.decode()).split() == ["1", "1"]
    await store.close()
