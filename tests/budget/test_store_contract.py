"""The BudgetStore contract: every store passes the same suite (memory and a real redis-server)."""

from __future__ import annotations

import pytest

from tokenward.budget import policy
from tokenward.budget.policy import BUCKET, TOKENS, Check
from tokenward.budget.reconcile import Reconciler
from tokenward.budget.store import ALREADY_RESERVED, LEASE_LIVE, SETTLED, UNKNOWN, Layout, LeaseRenewal

from .helpers import NS, REQUEST, SCALE, bucket, gauge, reserve, settle, soft, spend


def tokens_layout(tpm: int = 1000, rpm: int = 10, streams: int = 2) -> Layout:
    return Layout(NS, [gauge("streams", streams), bucket("tokens", tpm), bucket("requests", rpm, REQUEST)])


async def test_reserve_debits_every_check(store, clock):
    layout = tokens_layout()
    [out] = await store.reserve([reserve(layout, "r1", clock.ms, [1, 300, 1])])
    assert out.ok and out.failed == -1 and out.shadow == ()
    assert out.levels == (1, 700 * SCALE, 9 * SCALE)
    assert await store.value(layout.keys[0]) == 1
    assert await store.value(layout.keys[1]) == (700 * SCALE, clock.ms)
    assert await store.open_reservations(layout.leases_key) == 1


async def test_refusal_is_all_or_nothing_with_an_honest_retry(store, clock):
    layout = tokens_layout(tpm=600)  # refills 10 tokens a second
    [first] = await store.reserve([reserve(layout, "r1", clock.ms, [1, 500, 1])])
    assert first.ok
    [out] = await store.reserve([reserve(layout, "r2", clock.ms, [1, 250, 1])])
    assert not out.ok and out.failed == 1
    assert out.retry_ms == 15_000   # 150 tokens short at 10 tokens/s
    assert policy.retry_after_s(out.retry_ms) == 15
    # Nothing of r2 was applied: the stream gauge and the request bucket are unchanged.
    assert await store.value(layout.keys[0]) == 1
    assert await store.value(layout.keys[2]) == (9 * SCALE, clock.ms)
    assert await store.open_reservations(layout.leases_key) == 1
    clock.advance(14.999)
    [early] = await store.reserve([reserve(layout, "r3", clock.ms, [1, 250, 1])])
    assert not early.ok
    clock.advance(0.001)
    [honoured] = await store.reserve([reserve(layout, "r4", clock.ms, [1, 250, 1])])
    assert honoured.ok


async def test_amount_above_capacity_has_no_retry(store, clock):
    layout = tokens_layout(tpm=100)
    [out] = await store.reserve([reserve(layout, "r1", clock.ms, [1, 101, 1])])
    assert not out.ok and out.retry_ms == -1


async def test_gauge_refusal_has_no_retry(store, clock):
    layout = tokens_layout(streams=1)
    assert (await store.reserve([reserve(layout, "a", clock.ms, [1, 10, 1])]))[0].ok
    [out] = await store.reserve([reserve(layout, "b", clock.ms, [1, 10, 1])])
    assert not out.ok and out.failed == 0 and out.retry_ms == -1


async def test_settle_refunds_exactly_and_only_once(store, clock):
    layout = tokens_layout()
    await store.reserve([reserve(layout, "r1", clock.ms, [1, 300, 1])])
    assert await store.settle([settle(layout, "r1", clock.ms, tokens=42)]) == [SETTLED]
    assert await store.value(layout.keys[1]) == ((1000 - 42) * SCALE, clock.ms)
    assert await store.value(layout.keys[0]) is None            # the slot is back
    assert await store.value(layout.keys[2]) == (9 * SCALE, clock.ms)  # a request stays counted
    assert await store.open_reservations(layout.leases_key) == 0
    assert await store.settle([settle(layout, "r1", clock.ms, tokens=0)]) == [UNKNOWN]
    assert await store.value(layout.keys[1]) == ((1000 - 42) * SCALE, clock.ms)


async def test_full_charge_keeps_the_debit_and_frees_the_slot(store, clock):
    layout = tokens_layout()
    await store.reserve([reserve(layout, "r1", clock.ms, [1, 300, 1])])
    assert await store.settle([settle(layout, "r1", clock.ms, tokens=5, mode=policy.FULL)]) == [SETTLED]
    assert await store.value(layout.keys[1]) == (700 * SCALE, clock.ms)
    assert await store.value(layout.keys[0]) is None


async def test_void_undoes_every_debit(store, clock):
    layout = tokens_layout()
    await store.reserve([reserve(layout, "r1", clock.ms, [1, 300, 1])])
    await store.settle([settle(layout, "r1", clock.ms, mode=policy.VOID)])
    assert await store.value(layout.keys[1]) == (1000 * SCALE, clock.ms)
    assert await store.value(layout.keys[2]) == (10 * SCALE, clock.ms)


async def test_usage_outside_the_reservation_moves_the_budget_by_at_most_the_reservation(store, clock):
    # a backend's usage report is a claim: above the reservation it is charged the
    # reservation, below zero nothing is refunded beyond it (issue 27)
    layout = Layout(NS, [bucket("tokens", 1000), spend("d", 10_000, clock.ms + 86_400_000)])
    await store.reserve([reserve(layout, "r0", clock.ms, [300, 3000])])
    await store.settle([settle(layout, "r0", clock.ms, tokens=300, cost=3000)])
    await store.reserve([reserve(layout, "r1", clock.ms, [500, 5000])])
    await store.settle([settle(layout, "r1", clock.ms, tokens=1500, cost=10**12)])
    assert await store.value(layout.keys[0]) == (200 * SCALE, clock.ms)
    assert await store.value(layout.keys[1]) == 8000
    await store.reserve([reserve(layout, "r2", clock.ms, [100, 1000])])
    await store.settle([settle(layout, "r2", clock.ms, tokens=-3_000_000, cost=-3_000_000)])
    assert await store.value(layout.keys[0]) == (200 * SCALE, clock.ms)
    assert await store.value(layout.keys[1]) == 8000


async def test_refill_is_continuous_and_capped(store, clock):
    layout = Layout(NS, [bucket("tokens", 600)])
    await store.reserve([reserve(layout, "r1", clock.ms, [600])])
    clock.advance(1.5)  # 15 tokens back
    [out] = await store.reserve([reserve(layout, "r2", clock.ms, [15])])
    assert out.ok and out.levels == (0,)
    clock.advance(3600)
    [out] = await store.reserve([reserve(layout, "r3", clock.ms, [0])])
    assert out.levels == (600 * SCALE,)


async def test_a_clock_behind_refills_nothing(store, clock):
    layout = Layout(NS, [bucket("tokens", 600)])
    await store.reserve([reserve(layout, "r1", clock.ms, [300])])
    [out] = await store.reserve([reserve(layout, "r2", clock.ms - 5000, [100])])
    assert out.ok and out.levels == (200 * SCALE,)
    assert await store.value(layout.keys[0]) == (200 * SCALE, clock.ms)


async def test_refund_never_lifts_a_bucket_above_capacity(store, clock):
    layout = Layout(NS, [bucket("tokens", 600)])
    await store.reserve([reserve(layout, "r1", clock.ms, [500])])
    clock.advance(120)
    await store.settle([settle(layout, "r1", clock.ms, tokens=0)])
    assert await store.value(layout.keys[0]) == (600 * SCALE, clock.ms)


async def test_spend_counts_reserved_then_actual_cost(store, clock):
    layout = Layout(NS, [spend("d", 1000, clock.ms + 86_400_000)])
    await store.reserve([reserve(layout, "r1", clock.ms, [700])])
    [out] = await store.reserve([reserve(layout, "r2", clock.ms, [400])])
    assert not out.ok and out.failed == 0 and out.retry_ms == -1
    await store.settle([settle(layout, "r1", clock.ms, cost=120)])
    assert await store.value(layout.keys[0]) == 120
    assert (await store.reserve([reserve(layout, "r3", clock.ms, [800])]))[0].ok


async def test_shadow_limit_records_but_never_refuses(store, clock):
    layout = Layout(NS, [bucket("tokens", 100, enforce=0), gauge("streams", 1, enforce=0)])
    await store.reserve([reserve(layout, "r1", clock.ms, [80, 1])])
    [out] = await store.reserve([reserve(layout, "r2", clock.ms, [80, 1])])
    assert out.ok and out.shadow == (0, 1)
    assert out.levels == (20 * SCALE, 2)          # the bucket is not driven negative
    await store.settle([settle(layout, "r2", clock.ms, tokens=10)])
    assert await store.value(layout.keys[0]) == (10 * SCALE, clock.ms)  # actual usage still charged
    assert await store.value(layout.keys[1]) == 1


async def test_guaranteed_share_first_then_shared_reserve(store, clock):
    ns = "tw:{u:local}"
    layout = Layout(ns, [soft("share", 100, ns=ns), bucket("pool", 300, ns=ns)])
    [out] = await store.reserve([reserve(layout, "r1", clock.ms, [250, 250])])
    assert out.ok and out.levels == (0, 150 * SCALE)
    [out] = await store.reserve([reserve(layout, "r2", clock.ms, [200, 200])])
    assert not out.ok and out.failed == 1
    # 130 used: the share is attributed first (100), the pool gets 120 of its 150 back.
    await store.settle([settle(layout, "r1", clock.ms, tokens=130)])
    assert await store.value(layout.keys[0]) == (0, clock.ms)
    assert await store.value(layout.keys[1]) == (270 * SCALE, clock.ms)


async def test_full_charge_of_a_share_and_pool_keeps_both_debits(store, clock):
    ns = "tw:{u:local}"
    layout = Layout(ns, [soft("share", 100, ns=ns), bucket("pool", 300, ns=ns)])
    await store.reserve([reserve(layout, "r1", clock.ms, [250, 250])])
    await store.settle([settle(layout, "r1", clock.ms, mode=policy.FULL)])
    assert await store.value(layout.keys[0]) == (0, clock.ms)
    assert await store.value(layout.keys[1]) == (150 * SCALE, clock.ms)


async def test_a_batch_is_independent_calls(store, clock):
    a, b = Layout(NS, [bucket("tokens", 100)]), Layout("tw:{u:x}", [bucket("pool", 50, ns="tw:{u:x}")])
    outs = await store.reserve([reserve(a, "r1", clock.ms, [80]), reserve(b, "r1", clock.ms, [80])])
    assert [o.ok for o in outs] == [True, False]
    assert await store.settle([settle(a, "r1", clock.ms, tokens=1), settle(b, "r1", clock.ms)]) == [SETTLED, UNKNOWN]


async def test_reserving_the_same_id_twice_is_idempotent(store, clock):
    layout = Layout(NS, [bucket("tokens", 100)])
    await store.reserve([reserve(layout, "r1", clock.ms, [60])])
    [again] = await store.reserve([reserve(layout, "r1", clock.ms, [60])])
    assert again == ALREADY_RESERVED
    assert await store.value(layout.keys[0]) == (40 * SCALE, clock.ms)


async def test_leases_expire_renew_and_reconcile(store, clock):
    layout = tokens_layout()
    await store.reserve([reserve(layout, "old", clock.ms, [1, 100, 1], lease_ms=1000)])
    await store.reserve([reserve(layout, "kept", clock.ms, [1, 100, 1], lease_ms=1000)])
    clock.advance(0.5)
    await store.renew([LeaseRenewal(layout.leases_key, clock.ms + 1000, ["kept", "gone-already"])])
    clock.advance(0.6)
    assert await store.expired([layout.leases_key], clock.ms, 10) == [["old"]]
    assert await store.record_keys([layout.record_key("old"), layout.record_key("nope")]) == [list(layout.keys), None]
    # a live lease is not reconciled
    assert await store.settle([settle(layout, "kept", clock.ms, mode=policy.EXPIRED)]) == [LEASE_LIVE]
    reconciler = Reconciler(store, lambda: [NS], clock)
    assert await reconciler.run_once() == 1
    assert await reconciler.run_once() == 0
    assert await store.open_reservations(layout.leases_key) == 1
    assert await store.value(layout.keys[0]) == 1                # only "kept" holds a slot
    assert await store.value(layout.keys[1]) == (800 * SCALE + 1100 * 1000, clock.ms)  # "old" charged in full
    # a renewal never resurrects a settled reservation
    await store.renew([LeaseRenewal(layout.leases_key, clock.ms + 1000, ["old"])])
    assert await store.open_reservations(layout.leases_key) == 1


async def test_two_reconcilers_settle_once(store, clock):
    layout = tokens_layout()
    await store.reserve([reserve(layout, "old", clock.ms, [1, 100, 1], lease_ms=10)])
    clock.advance(1)
    first, second = Reconciler(store, lambda: [NS], clock), Reconciler(store, lambda: [NS], clock)
    ids = await store.expired([layout.leases_key], clock.ms, 10)
    assert ids == [["old"]]
    assert await first.run_once() + await second.run_once() == 1


async def test_a_flushed_script_cache_is_reloaded_transparently(store, clock, request):
    if store.name != "redis":
        return
    from tokenward.budget.resp import pack

    layout = Layout(NS, [bucket("tokens", 100)])
    assert (await store.reserve([reserve(layout, "r1", clock.ms, [10])]))[0].ok
    await store._run(pack(b"SCRIPT", b"FLUSH"), 1)
    assert (await store.reserve([reserve(layout, "r2", clock.ms, [10])]))[0].ok
    assert await store.settle([settle(layout, "r1", clock.ms), settle(layout, "r2", clock.ms)]) == [SETTLED, SETTLED]


async def test_sweep_drops_buckets_idle_long_enough_to_be_full_and_nothing_else(store, clock):
    """A bucket idle for SWEEP_IDLE_MS is full, which is what a missing one reads as: the
    sweep drops it (a rotated key's per-key bucket must not stay while its tenant is active)
    and leaves fresh buckets, gauges, spend and open reservations alone."""
    old_key = Layout(NS, [bucket("k:old:b:tokens", 600)])
    layout = Layout(NS, [gauge("streams", 5), spend("daily", 10_000, clock.ms + 86_400_000), bucket("tokens", 600)])
    [a] = await store.reserve([reserve(old_key, "r-old", clock.ms, [100])])
    assert a.ok
    assert await store.settle([settle(old_key, "r-old", clock.ms, tokens=100)]) == [SETTLED]
    clock.advance(policy.SWEEP_IDLE_MS / 1000)
    [b] = await store.reserve([reserve(layout, "r-open", clock.ms, [1, 50, 200])])     # stays open
    assert b.ok
    cursor, dropped = 0, 0
    for _ in range(20):
        [(cursor, gone)] = await store.sweep([NS], [cursor], clock.ms, 10)
        dropped += gone
        if cursor == 0:
            break
    assert cursor == 0 and dropped == 1
    assert await store.value(old_key.keys[0]) is None                       # gone: reads as full
    assert await store.value(layout.keys[0]) == 1                           # the open stream's slot
    assert await store.value(layout.keys[1]) == 50                          # spend
    assert await store.value(layout.keys[2]) == ((600 - 200) * SCALE, clock.ms)   # a fresh bucket
    # the open reservation still settles exactly
    assert await store.settle([settle(layout, "r-open", clock.ms, tokens=200, cost=50)]) == [SETTLED]
    assert await store.value(layout.keys[0]) is None
    # and a bucket that read as full still answers as full
    [c] = await store.reserve([reserve(old_key, "r-new", clock.ms, [600])])
    assert c.ok and c.levels == (0,)


async def test_reconciler_sweeps_only_when_due(store, clock):
    key_bucket = Layout(NS, [bucket("k:gone:b:requests", 60, REQUEST)])
    [a] = await store.reserve([reserve(key_bucket, "r1", clock.ms, [1])])
    assert a.ok and await store.settle([settle(key_bucket, "r1", clock.ms)]) == [SETTLED]
    reconciler = Reconciler(store, lambda: [NS], lambda: clock.now)
    reconciler.SWEEP_EVERY_S = 300.0
    assert await reconciler.sweep_if_due() == 0                             # due, but too fresh to drop
    clock.advance(policy.SWEEP_IDLE_MS / 1000)
    assert await reconciler.sweep_if_due() == 0                             # idle enough, not due yet
    assert await store.value(key_bucket.keys[0]) is not None
    clock.advance(300.0)
    assert await reconciler.sweep_if_due() == 1 and reconciler.swept == 1
    assert await store.value(key_bucket.keys[0]) is None


def test_a_bucket_slower_than_a_minute_to_refill_is_refused_where_layouts_are_built():
    with pytest.raises(ValueError, match="longer than a minute"):
        Layout(NS, [Check(f"{NS}:b:slow", BUCKET, TOKENS, 100 * SCALE + 1, 100, 1)])
    Layout(NS, [bucket("fine", 100)])                                   # per-minute buckets are fine
