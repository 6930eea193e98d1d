"""Property tests over random trees of jobs and random exits, through the real code: the
job book (creation, cancellation) and the Admitter (one reservation per request, settled
on any exit) on the memory store, and the same runs on a real Redis, which must agree.

After every step, at every level: nothing is negative or above its budget, a job holds
exactly what its open reservations reserved, attempts and open requests stay in bounds; a
second settle of the same reservation changes nothing. At the end, cancelling the roots and
letting every request end (settled, or abandoned and reconciled after its lease) leaves no
reservation behind: nothing held by any job, no lease, no stream slot, and nothing more
admitted in any cancelled tree.
"""

from __future__ import annotations

import time

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tokenward.budget import policy
from tokenward.budget.admission import Admitter
from tokenward.budget.limits import tenant_namespace
from tokenward.budget.memory import MemoryStore
from tokenward.budget.redis import RedisStore
from tokenward.budget.store import UNKNOWN, SettleCall
from tokenward.config import parse_config
from tokenward.jobs.book import JobBook
from tokenward.jobs.terms import JobRequest

from .conftest import FakeClock

CONFIG = """
plans:
  team: {tokens_per_minute: 10000000, requests_per_minute: 1000000, max_concurrent_streams: 1000,
         max_output_tokens: 4096, max_job_tokens: 100000, max_open_jobs: 1000, jobs_per_minute: 100000}
tenants: {acme: {plan: team}}
store: {lease_s: 30}
"""
NS = tenant_namespace("tw", "acme")

STEPS = {
    # a root job is budgeted in tokens or in USD (micro-USD: the same integers), a child in its parent's unit
    "create": st.tuples(st.just("create"), st.integers(-1, 7), st.integers(1, 400), st.sampled_from([None, 1, 2, 5]),
                        st.booleans()),
    "reserve": st.tuples(st.just("reserve"), st.integers(0, 7), st.integers(0, 150)),
    "settle": st.tuples(st.just("settle"), st.integers(0, 30), st.sampled_from([policy.SETTLE, policy.FULL, policy.VOID]),
                        st.integers(0, 200)),
    "dispatch": st.tuples(st.just("dispatch"), st.integers(0, 30)),
    "crash": st.tuples(st.just("crash"), st.integers(0, 30)),
    "cancel": st.tuples(st.just("cancel"), st.integers(0, 7)),
    "advance": st.tuples(st.just("advance"), st.integers(0, 20_000)),
}
# weighted: requests and their exits are most of what happens to a job
step = st.sampled_from(["reserve"] * 5 + ["settle"] * 3 + ["create", "dispatch", "crash", "cancel", "advance"]
                       ).flatmap(STEPS.__getitem__)


class World:
    def __init__(self, store, clock: FakeClock) -> None:
        self.config = parse_config(CONFIG, environ={})
        self.plan = self.config.plans["team"]
        self.clock = clock
        self.store = store
        self.admitter = Admitter(self.config, store, clock=clock)
        self.book = JobBook(self.admitter)
        self.jobs: list = []            # JobMeta, in creation order
        self.tickets: list = []         # [ticket, job id, tokens, state]: open | settled | abandoned
        self.trace: list = []

    async def values(self) -> dict:
        records = await self.store.jobs(NS, [m.id for m in self.jobs])
        return {m.id: r.value for m, r in zip(self.jobs, records)}

    async def check(self) -> dict:
        values = await self.values()
        for meta in self.jobs:
            v = values[meta.id]
            assert 0 <= v.used <= meta.budget, (meta, v)
            assert 0 <= v.held <= v.used and 0 <= v.carved <= v.used, (meta, v)
            assert 0 <= v.open <= v.attempts, (meta, v)
            assert meta.max_attempts is None or v.attempts <= meta.max_attempts, (meta, v)
            live = [t for t in self.tickets if t[1] == meta.id and t[3] != "settled"]
            assert v.held == sum(t[2] for t in live) and v.open == len(live), (meta, v, live)
        self.trace.append(values)
        return values

    async def step(self, s: tuple) -> None:
        kind = s[0]
        if kind == "create":
            parent = self.jobs[s[1] % len(self.jobs)] if s[1] >= 0 and self.jobs else None
            usd = parent.unit == policy.COST if parent is not None else s[4]
            budget = {"budget_usd": s[2] / 1_000_000} if usd else {"budget_tokens": s[2]}
            made = await self.book.create("acme", self.plan, JobRequest(**budget, max_attempts=s[3],
                                                                        parent=parent.id if parent else None))
            self.trace.append(getattr(made, "reason", None))
            if not hasattr(made, "reason"):
                self.jobs.append(made)
        elif kind == "reserve" and self.jobs:
            meta = self.jobs[s[1] % len(self.jobs)]
            job = await self.book.resolve("acme", meta.id)
            decision = await self.admitter.reserve("acme", "team", self.plan, "k1", None, None, s[2], s[2], job)
            self.trace.append(decision.reason)
            if decision.ticket is not None:
                self.tickets.append([decision.ticket, meta.id, s[2], "open"])
        elif kind in ("settle", "dispatch", "crash"):
            await self.exit(s)
        elif kind == "cancel" and self.jobs:
            await self.book.cancel("acme", self.jobs[s[1] % len(self.jobs)].id)
        elif kind == "advance":
            self.clock.advance(s[1] / 1000)

    async def exit(self, s: tuple) -> None:
        open_ = [t for t in self.tickets if t[3] == "open"]
        if not open_:
            return
        t = open_[s[1] % len(open_)]
        ticket = t[0]
        if s[0] == "dispatch":
            await self.store.dispatch(NS, ticket.reservation_id, [t[1]], self.clock.ms)
        elif s[0] == "crash":   # the replica dies: nobody settles it or renews its lease
            self.admitter.keeper.release(ticket)
            t[3] = "abandoned"
        else:
            assert await self.admitter.settle(ticket, s[3], s[3], s[2])
            t[3] = "settled"
            before = await self.values()
            layout, record_key = ticket.parts[0]
            again = SettleCall(layout.leases_key, ticket.reservation_id, record_key, layout.keys, self.clock.ms,
                               0, 0, policy.FULL, layout)
            assert await self.store.settle([again]) == [UNKNOWN]       # idempotent
            assert not await self.admitter.settle(ticket, 0, 0, policy.FULL)
            assert await self.values() == before

    async def end(self) -> None:
        """Cancel every root, end every request (the unwinding settles what is open; what
        was abandoned waits for its lease), and look for anything left behind."""
        for meta in self.jobs:
            if meta.parent is None:
                await self.book.cancel("acme", meta.id)
        for t in self.tickets:
            if t[3] == "open":
                await self.admitter.settle(t[0], 0, 0, policy.FULL)
                t[3] = "settled"
        self.clock.advance(31)
        await self.admitter.keeper._reconcilers[0][1].run_once()
        for t in self.tickets:
            t[3] = "settled"
        values = await self.check()
        assert all(v.held == 0 and v.open == 0 for v in values.values())
        assert await self.store.open_reservations(NS + ":leases") == 0
        assert await self.store.value(NS + ":g:streams") is None
        for meta in self.jobs:
            job = await self.book.resolve("acme", meta.id)
            decision = await self.admitter.reserve("acme", "team", self.plan, "k1", None, None, 0, 0, job)
            assert decision.ticket is None and decision.reason is not None
        await self.admitter.keeper.close()


tree = st.lists(st.tuples(st.just("create"), st.integers(-1, 5), st.integers(20, 400),
                          st.sampled_from([None, 1, 2, 5]), st.booleans()), min_size=1, max_size=6)


async def play(store, steps: list, start: float) -> list:
    world = World(store, FakeClock(start))
    for s in steps:
        await world.step(s)
        await world.check()
    await world.end()
    event(f"jobs: {min(len(world.jobs), 3)}+, requests admitted: {min(len(world.tickets), 5)}+")
    return world.trace


def normalised(trace: list) -> list:
    """Job ids are random per run: compare values in creation order."""
    return [list(item.values()) if isinstance(item, dict) else item for item in trace]


@settings(max_examples=200, deadline=None)
@given(tree, st.lists(step, min_size=5, max_size=40))
async def test_random_job_trees_and_exits_keep_every_level_in_bounds(jobs, steps):
    await play(MemoryStore(), jobs + steps, float(int(time.time())))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree, st.lists(step, min_size=5, max_size=25))
async def test_redis_runs_the_same_job_trees_alike(redis_server_session, jobs, steps):
    steps = jobs + steps
    start = float(int(time.time()))
    expected = await play(MemoryStore(), steps, start)
    store = RedisStore(redis_server_session.url, timeout_s=2.0)
    try:
        actual = await play(store, steps, start)
    finally:
        await store.close()
    assert normalised(actual) == normalised(expected)
