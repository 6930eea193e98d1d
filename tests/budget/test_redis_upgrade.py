"""Budget state written by an earlier version (one Redis key per value, reservation
records as {c, k} hashes) is read where it is and moved into the namespace's hash, and a
reservation still open across the upgrade settles exactly: an upgrade needs no migration
and leaks no slot."""

from __future__ import annotations

import pytest

from tests.budget.helpers import NS, REQUEST, SCALE, bucket, gauge, reserve, settle, spend
from tokenward.budget import policy
from tokenward.budget.reconcile import Reconciler
from tokenward.budget.redis import RedisStore
from tokenward.budget.resp import pack
from tokenward.budget.store import SETTLED, Layout


@pytest.fixture
async def store(redis_server):
    store = RedisStore(redis_server.url, timeout_s=1.0)
    yield store
    await store.close()


def plan(clock) -> Layout:
    return Layout(NS, [bucket("tokens", 1000), bucket("requests", 100, unit=REQUEST), gauge("streams", 5),
                       spend("d", 10_000, clock.ms + 86_400_000)])


async def write_earlier_version(store: RedisStore, layout: Layout, clock) -> None:
    """What the previous scripts left: one open reservation "old" of 200 tokens, 1 request,
    1 stream and 50 cost units, its lease and every value it moved."""
    tokens, requests, streams, day = layout.keys
    await store._run(b"".join([
        pack(b"SET", tokens, f"{400 * SCALE} {clock.ms}"),
        pack(b"HSET", requests, b"l", 90 * SCALE, b"t", clock.ms),   # an even older {l, t} bucket
        pack(b"SET", streams, 1),
        pack(b"SET", day, 300),
        pack(b"HSET", layout.record_key("old"),
             b"c", " ".join(f"{c.kind} {c.unit} {c.p1} {c.p2} {a} {a}" for c, a in zip(layout.checks, (200, 1, 1, 50))),
             b"k", " ".join(layout.keys)),
        pack(b"ZADD", layout.leases_key, clock.ms + 1_000, b"old"),
    ]), 6)


async def values(store: RedisStore, layout: Layout) -> list:
    return [await store.value(key) for key in layout.keys]


async def test_a_reservation_reads_the_earlier_keys_once_and_an_old_reservation_settles_after_it(store, clock):
    layout = plan(clock)
    await write_earlier_version(store, layout, clock)
    [out] = await store.reserve([reserve(layout, "new", clock.ms, [100, 1, 1, 40])])
    assert out.ok and out.levels == (300 * SCALE, 89 * SCALE, 2, 340)
    assert await store._run(pack(b"EXISTS", *layout.keys), 1) == [0]      # moved, not copied
    assert await values(store, layout) == [(300 * SCALE, clock.ms), (89 * SCALE, clock.ms), 2, 340]

    # the old reservation, as the reconciler finds it once its lease is over: charged in full
    clock.advance(2)
    reconciler = Reconciler(store, lambda: [NS], clock)
    assert await reconciler.run_once() == 1
    assert await store._run(pack(b"EXISTS", layout.record_key("old")), 1) == [0]
    tokens, requests, streams, spent = await values(store, layout)
    assert streams == 1 and spent == 340
    assert tokens == policy.refill((300 * SCALE, clock.ms - 2000), 1000 * SCALE, 1000, clock.ms)
    # the new one settles on usage: 100 reserved, 30 used
    assert await store.settle([settle(layout, "new", clock.ms, tokens=30, cost=10)]) == [SETTLED]
    assert await values(store, layout) == [(tokens[0] + 70 * SCALE, clock.ms), requests, None, 310]
    assert await store.open_reservations(layout.leases_key) == 0


async def test_an_old_reservation_settles_on_usage_before_any_new_one(store, clock):
    layout = plan(clock)
    await write_earlier_version(store, layout, clock)
    # no new layout in hand: the settle a restarted replica's stage would send, by record keys
    [keys] = await store.record_keys([layout.record_key("old")])
    assert keys == list(layout.keys)
    call = settle(layout, "old", clock.ms, tokens=50, cost=20)._replace(layout=None, keys=keys)
    assert await store.settle([call]) == [SETTLED]
    assert await store.settle([call]) == [0]                              # once
    assert await values(store, layout) == [((400 + 150) * SCALE, clock.ms), (90 * SCALE, clock.ms), None, 270]
    assert await store._run(pack(b"EXISTS", *layout.keys, layout.record_key("old")), 1) == [0]
    assert await store.open_reservations(layout.leases_key) == 0
