"""Agent jobs in the BudgetStore contract: every store (memory, Redis through both clients,
a Redis Cluster) runs the same cases through the same calls and must answer alike."""

from __future__ import annotations

import orjson

from tokenward.budget import job_policy, policy
from tokenward.budget.job_policy import Limits
from tokenward.budget.policy import ANCESTOR, CANCELLED, EXHAUSTED, JOB, OPEN, TOKENS, Check, JobValue
from tokenward.budget.reconcile import Reconciler
from tokenward.budget.store import SETTLED, JobCreate, Layout

from .helpers import NS, REQUEST, bucket, reserve, settle

LIMITS = Limits(per_minute=10, max_open=5)


def job_check(job_id: str, budget: int, max_attempts: int = 0) -> Check:
    return Check(f"{NS}:j:{job_id}", JOB, TOKENS, budget, max_attempts, 1)


def ancestor(job_id: str) -> Check:
    return Check(f"{NS}:j:{job_id}", ANCESTOR, TOKENS, 0, 0, 1)


def job_layout(job_id: str, budget: int, ancestors: tuple[str, ...] = (), max_attempts: int = 0) -> Layout:
    return Layout(NS, [job_check(job_id, budget, max_attempts), *map(ancestor, ancestors),
                       bucket("tokens", 100_000), bucket("requests", 1000, REQUEST)])


def amounts(layout: Layout, tokens: int) -> list[int]:
    """One amount per check: the tokens for the job and the tenant, 1 request."""
    return [1 if c.unit == REQUEST else tokens for c in layout.checks]


async def create(store, clock, job_id: str, budget: int, seconds: float = 60, parent: str = "",
                 parent_budget: int = 0, ancestors: tuple[str, ...] = (), max_children: int = 0,
                 limits: Limits = LIMITS) -> tuple[int, int]:
    meta = orjson.dumps({"id": job_id, "budget": budget})
    return await store.create_job(JobCreate(NS, job_id, clock.ms, clock.ms + int(seconds * 1000), budget, limits,
                                            meta, parent, parent_budget, max_children, ancestors))


async def value(store, job_id: str) -> JobValue | None:
    [record] = await store.jobs(NS, [job_id])
    return record.value


async def test_a_job_is_created_with_its_terms_and_read_back(store, clock):
    assert await create(store, clock, "job_a", 100) == (job_policy.CREATED, 0)
    [record, missing] = await store.jobs(NS, ["job_a", "job_nope"])
    assert record.value == JobValue(0, 0, 0, 0, 0, 0, OPEN, clock.ms + 60_000)
    assert orjson.loads(record.meta) == {"id": "job_a", "budget": 100}
    assert record.children == ()
    assert missing.value is None and missing.meta is None


async def test_requests_reserve_against_the_job_and_settle_the_difference(store, clock):
    await create(store, clock, "job_a", 100)
    layout = job_layout("job_a", 100)
    outcomes = await store.reserve([reserve(layout, f"r{i}", clock.ms, amounts(layout, 25)) for i in range(5)])
    assert [o.ok for o in outcomes] == [True, True, True, True, False]
    refused = outcomes[-1]
    assert refused.failed == 0 and refused.retry_ms == -1 and refused.levels[0] == 100
    assert await value(store, "job_a") == JobValue(100, 100, 0, 4, 4, 0, OPEN, clock.ms + 60_000)
    # known usage: the job keeps what was used; unknown: charged in full; void: not an attempt
    assert await store.settle([settle(layout, "r0", clock.ms, tokens=10),
                               settle(layout, "r1", clock.ms, tokens=99),   # more than reserved: capped
                               settle(layout, "r2", clock.ms, mode=policy.FULL),
                               settle(layout, "r3", clock.ms, mode=policy.VOID)]) == [SETTLED] * 4
    assert await value(store, "job_a") == JobValue(10 + 25 + 25, 0, 0, 3, 0, 0, OPEN, clock.ms + 60_000)
    # settling twice changes nothing
    await store.settle([settle(layout, "r0", clock.ms, tokens=0)])
    assert (await value(store, "job_a")).used == 60


async def test_attempts_deadline_and_a_missing_job_refuse(store, clock):
    await create(store, clock, "job_a", 1000, seconds=10)
    layout = job_layout("job_a", 1000, max_attempts=2)
    outcomes = await store.reserve([reserve(layout, f"r{i}", clock.ms, amounts(layout, 1)) for i in range(3)])
    assert [o.ok for o in outcomes] == [True, True, False]
    await create(store, clock, "job_b", 1000, seconds=10)
    late = job_layout("job_b", 1000)
    clock.advance(10)
    [out] = await store.reserve([reserve(late, "late", clock.ms, amounts(late, 1))])
    assert not out.ok and out.failed == 0
    [gone] = await store.reserve([reserve(L := job_layout("job_zz", 1000), "x", clock.ms, amounts(L, 1))])
    assert not gone.ok and gone.failed == 0 and gone.levels[0] == -1
    # nothing of a refused reservation was applied to the tenant's buckets
    assert await store.value(f"{NS}:b:requests") == ((1000 - 2) * 60_000, clock.ms - 10_000)


async def test_a_child_carves_its_budget_out_of_the_parents_allowance(store, clock):
    await create(store, clock, "job_p", 100)
    assert await create(store, clock, "job_c1", 60, parent="job_p", parent_budget=100) == (job_policy.CREATED, 0)
    assert await create(store, clock, "job_c2", 41, parent="job_p", parent_budget=100) == (job_policy.PARENT_BUDGET, -1)
    assert await create(store, clock, "job_c2", 40, parent="job_p", parent_budget=100,
                        max_children=1) == (job_policy.PARENT_CHILDREN, -1)
    assert await create(store, clock, "job_c2", 40, parent="job_p", parent_budget=100) == (job_policy.CREATED, 0)
    [parent] = await store.jobs(NS, ["job_p"])
    assert parent.value.used == 100 and parent.value.carved == 100 and parent.value.children == 2
    assert parent.children == ("job_c1", "job_c2")
    assert await create(store, clock, "job_x", 1, parent="job_nope", parent_budget=5) == (job_policy.PARENT_MISSING, -1)
    # the parent's own requests find nothing left
    [out] = await store.reserve([reserve(L := job_layout("job_p", 100), "rp", clock.ms, amounts(L, 1))])
    assert not out.ok
    # a grandchild under c1 draws on c1's carve, checked against every ancestor
    assert await create(store, clock, "job_g", 30, parent="job_c1", parent_budget=60,
                        ancestors=("job_p",)) == (job_policy.CREATED, 0)
    grandchild = job_layout("job_g", 30, ("job_c1", "job_p"))
    [ok] = await store.reserve([reserve(grandchild, "rg", clock.ms, amounts(grandchild, 30))])
    assert ok.ok


async def test_creation_is_bounded_by_rate_and_open_jobs(store, clock):
    limits = Limits(per_minute=3, max_open=2)
    assert [(await create(store, clock, f"job_{i}", 10, seconds=5, limits=limits))[0] for i in range(3)] == [
        job_policy.CREATED, job_policy.CREATED, job_policy.TOO_MANY_OPEN]
    clock.advance(5)   # both expired: no longer open
    assert await create(store, clock, "job_3", 10, limits=limits) == (job_policy.CREATED, 0)
    status, retry_ms = await create(store, clock, "job_4", 10, limits=limits)
    assert status == job_policy.RATE and retry_ms == 20_000 - 5_000 + 0   # 3 per minute: one per 20 s


async def test_cancelling_a_parent_cascades_and_hands_back_unused_allowance(store, clock):
    await create(store, clock, "job_p", 100)
    await create(store, clock, "job_c", 50, parent="job_p", parent_budget=100)
    [held] = await store.reserve([reserve(L := job_layout("job_c", 50, ("job_p",)), "rc", clock.ms, amounts(L, 20))])
    assert held.ok
    # cancelling the child alone: its unused 30 go back to the parent (listed, not closed)
    assert await store.close_jobs(NS, [("job_c", 50, 1), ("job_p", -1, -1)], CANCELLED) == 1
    assert (await value(store, "job_p")).used == 50 - 30 and (await value(store, "job_p")).carved == 20
    [out] = await store.reserve([reserve(L := job_layout("job_c", 50, ("job_p",)), "rc2", clock.ms, amounts(L, 1))])
    assert not out.ok
    await store.close_jobs(NS, [("job_c", 50, 1), ("job_p", 100, -1)], CANCELLED)   # child already: no change
    p, c = (await value(store, "job_p")), (await value(store, "job_c"))
    assert c.state == CANCELLED and c.used == 20 and c.held == 20
    assert p.state == CANCELLED   # (the hand-back happened when the child was cancelled first)
    # its reservation still settles (the request may have run), and nothing is left held
    layout = job_layout("job_c", 50, ("job_p",))
    assert await store.settle([settle(layout, "rc", clock.ms, tokens=5)]) == [SETTLED]
    assert (await value(store, "job_c")).held == 0
    assert await store.open_reservations(layout.leases_key) == 0


async def test_cancelling_the_parent_stops_the_childs_requests_in_the_same_step(store, clock):
    await create(store, clock, "job_p", 100)
    await create(store, clock, "job_c", 50, parent="job_p", parent_budget=100)
    assert await store.close_jobs(NS, [("job_c", 50, 1), ("job_p", 100, -1)], CANCELLED) == 2
    p = await value(store, "job_p")
    assert p.used == 0 and p.carved == 0          # the child's 50 came back before the parent closed
    [out] = await store.reserve([reserve(L := job_layout("job_c", 50, ("job_p",)), "r", clock.ms, amounts(L, 1))])
    assert not out.ok and out.failed == 0
    assert await store.dispatch(NS, "r", ["job_c", "job_p"], clock.ms) == job_policy.DISPATCH_CANCELLED
    assert await create(store, clock, "job_x", 1, parent="job_c", parent_budget=50,
                        ancestors=("job_p",)) == (job_policy.PARENT_CLOSED, -1)


async def test_an_exhausted_job_refuses_children_but_not_its_childrens_requests(store, clock):
    await create(store, clock, "job_p", 100)
    await create(store, clock, "job_c", 50, parent="job_p", parent_budget=100)
    assert await store.close_jobs(NS, [("job_p", 100, -1)], EXHAUSTED) == 1
    assert await store.close_jobs(NS, [("job_p", 100, -1)], EXHAUSTED) == 0
    assert await create(store, clock, "job_d", 10, parent="job_p", parent_budget=100) == (job_policy.PARENT_CLOSED, -1)
    [own] = await store.reserve([reserve(L := job_layout("job_p", 100), "rp", clock.ms, amounts(L, 1))])
    assert not own.ok
    [child] = await store.reserve([reserve(L := job_layout("job_c", 50, ("job_p",)), "rc", clock.ms, amounts(L, 10))])
    assert child.ok


async def test_a_reservation_abandoned_before_dispatch_is_reconciled_as_unused(store, clock):
    await create(store, clock, "job_a", 100, seconds=600)
    layout = job_layout("job_a", 100)
    await store.reserve([reserve(layout, "never", clock.ms, amounts(layout, 40), lease_ms=1000),
                         reserve(layout, "sent", clock.ms, amounts(layout, 30), lease_ms=1000)])
    assert await store.dispatch(NS, "sent", ["job_a"], clock.ms) == job_policy.DISPATCH_OK
    assert await store.dispatched(NS, "sent") and not await store.dispatched(NS, "never")
    clock.advance(2)
    reconciler = Reconciler(store, lambda: [NS], clock)
    assert await reconciler.run_once() == 2
    job = await value(store, "job_a")
    assert job.used == 30 and job.held == 0 and job.open == 0     # the dispatched one charged in full
    assert not await store.dispatched(NS, "sent")


async def test_the_sweep_drops_a_job_a_day_after_its_deadline(store, clock):
    await create(store, clock, "job_old", 10, seconds=1)
    clock.advance(1 + job_policy.KEEP_AFTER_DEADLINE_MS / 1000 - 1)
    await store.sweep([NS], [0], clock.ms, 1000)
    assert (await value(store, "job_old")) is not None
    clock.advance(1)
    await store.sweep([NS], [0], clock.ms, 1000)
    [record] = await store.jobs(NS, ["job_old"])
    assert record.value is None and record.meta is None
