"""This replica's open requests of each job, and ending them when their job ends.

A request that joins a job is registered here when the admission stage reserves it and
dropped when its reservation settles. When a job is cancelled (or its deadline, or an
ancestor's, passes), every open request of it and of its descendants is ended the way a
client disconnect ends one (``DisconnectWatch.cancel``): the request's task is cancelled
in the forward step, which closes the backend connection (the backend stops generating),
the runner unwinds and the reservation settles on the usage the stream had shown, and the
client, still there, gets an honest end: an in-band ``job_cancelled`` / ``job_expired``
error event on a started stream, else that envelope. A request not yet in the forward step
is stopped by the dispatch check (``JobRun.dispatch``): nothing new is dispatched.

A cancel on this replica ends its requests at once; other replicas learn it from the
store: while a replica has open job requests, a watcher reads their jobs' states every
``TICK_S`` (one HMGET per tenant), so a stream anywhere ends within about that long.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Protocol

from ..budget import job_policy
from ..budget.store import StoreUnavailable
from ..errors import Reason, Refusal
from ..http.responses import NO_RETRY
from ..pipeline.lifecycle import State
from .terms import job_value

if TYPE_CHECKING:
    from ..budget.store import JobRecord
    from ..pipeline.context import RequestContext
    from .terms import JobBudgets

log = logging.getLogger("tokenward.jobs")
_WHY = {job_policy.DISPATCH_CANCELLED: Reason.job_cancelled, job_policy.DISPATCH_EXPIRED: Reason.job_expired,
        job_policy.DISPATCH_GONE: Reason.job_cancelled}


class JobLedger(Protocol):
    """What the runs of jobs ask of the book that opened them (book.py ``JobBook``)."""

    def now_ms(self) -> int: ...

    def namespace(self, tenant: str) -> str: ...

    async def dispatch(self, tenant: str, job: JobBudgets, reservation_id: str) -> Refusal | None: ...

    async def records(self, tenant: str, job_ids: list[str]) -> list[JobRecord]: ...


class JobRun:
    """One admitted request of a job on this replica."""

    __slots__ = ("book", "tenant", "namespace", "job", "reservation_id", "ctx", "stopped", "ids")

    def __init__(self, book: JobLedger, tenant: str, job: JobBudgets, reservation_id: str, ctx: RequestContext) -> None:
        self.book = book
        self.tenant = tenant
        self.namespace = book.namespace(tenant)
        self.job = job
        self.reservation_id = reservation_id
        self.ctx = ctx
        self.stopped: Reason | None = None
        self.ids = (job.meta.id, *job.meta.chain)

    async def dispatch(self) -> None:
        """Called by the forwarder right before the request is written to a backend: raises
        the refusal if the job (or an ancestor) can take no more work; records the dispatch."""
        refusal = None
        if self.stopped is None:
            refusal = await self.book.dispatch(self.tenant, self.job, self.reservation_id)
        if refusal is None and self.stopped is not None:
            refusal = Refusal(self.stopped, _message(self.job.meta.id, self.stopped), headers=(NO_RETRY,))
        if refusal is not None:
            raise refusal


class JobRuns:
    TICK_S = 0.05

    def __init__(self, book: JobLedger) -> None:
        self.book = book
        self.open: set[JobRun] = set()
        self._task: asyncio.Task[None] | None = None
        self.stopped = 0

    def add(self, ctx: RequestContext, tenant: str, job: JobBudgets, reservation_id: str) -> JobRun:
        run = JobRun(self.book, tenant, job, reservation_id, ctx)
        self.open.add(run)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._watch(), name="tokenward-job-watch")
        return run

    def remove(self, run: JobRun) -> None:
        self.open.discard(run)

    def stop(self, namespace: str, job_ids: set[str], reason: Reason) -> int:
        """End this replica's open requests of these jobs and of their descendants."""
        ended = 0
        for run in [r for r in self.open if r.namespace == namespace and not job_ids.isdisjoint(r.ids)]:
            ended += self._stop(run, reason)
        return ended

    def _stop(self, run: JobRun, reason: Reason) -> int:
        if run.stopped is not None:
            return 0
        run.stopped = reason
        self.stopped += 1
        ctx = run.ctx
        watch = ctx.disconnect
        if watch is None or not watch.armed or watch.fired:
            return 1   # not in the forward step yet: its dispatch check refuses it
        started = ctx.lifecycle.state is State.STREAMING
        if ctx.reason is None:
            ctx.reason = reason.name
            ctx.deciding_stage = "jobs"
            ctx.status = 200 if started else reason.status
        watch.cancel(Refusal(reason, _message(run.job.meta.id, reason), headers=(NO_RETRY,)))
        return 1

    async def _watch(self) -> None:
        while self.open:
            await asyncio.sleep(self.TICK_S)
            try:
                await self.check()
            except asyncio.CancelledError:
                raise
            except Exception:  # the watcher must outlive one bad tick (a store outage included)
                log.exception("job watcher tick failed")

    async def check(self) -> int:
        """Stop open requests whose job, or an ancestor, can take no more work."""
        by_ns: dict[str, list[JobRun]] = {}
        for run in self.open:
            if run.stopped is None:
                by_ns.setdefault(run.namespace, []).append(run)
        ended = 0
        now_ms = self.book.now_ms()
        for runs in by_ns.values():
            ids = sorted({job_id for run in runs for job_id in run.ids})
            try:
                records = await self.book.records(runs[0].tenant, ids)
            except (Refusal, StoreUnavailable):
                continue   # the store is away: a later tick sees the state
            values = {job_id: job_value(record) for job_id, record in zip(ids, records)}
            for run in runs:
                for job_id in run.ids:
                    why = job_policy.usable(values.get(job_id), now_ms)
                    if why:
                        ended += self._stop(run, _WHY[why])
                        break
        return ended


def _message(job_id: str, reason: Reason) -> str:
    if reason is Reason.job_expired:
        return f"job {job_id} (or an ancestor) passed its deadline; its open requests end"
    return f"job {job_id} (or an ancestor) was cancelled; its open requests end"
