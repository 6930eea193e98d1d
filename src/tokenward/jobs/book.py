"""Agent jobs against the budget store: create, look up, show, cancel, and explain a refusal.

A job lives in its tenant's namespace (``tw:{t:<tenant>}``): its counters, its terms and
its children's ids are fields of the tenant's hash, so every request of the job reserves
against the job, its ancestors, the key and the tenant in one atomic script on one hash
slot, and another tenant asking for the id finds nothing (``job_not_found``). The store
calls are ``BudgetStore``'s job methods; the arithmetic is ``budget/job_policy.py``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Sequence, TypeVar

from ..budget import job_policy
from ..budget.job_policy import Limits
from ..budget.limits import tenant_namespace
from ..budget import policy
from ..budget.policy import CANCELLED, COST, EXHAUSTED, TOKENS, JobValue
from ..budget.store import JobCreate, JobRecord, StoreUnavailable
from ..config.schema import PlanConfig
from ..errors import Reason, Refusal
from ..http.responses import NO_RETRY
from ..observe.work import WorkMetrics
from . import terms
from .runs import JobRuns
from .terms import JobBudgets, JobMeta, JobRequest, job_value

if TYPE_CHECKING:
    from ..budget.admission import Admitter

log = logging.getLogger("tokenward.jobs")
T = TypeVar("T")
UNAVAILABLE = Refusal(Reason.budget_store_unavailable, "the budget store is unavailable; try again shortly")
_TERMINAL = (NO_RETRY,)


def not_found(job_id: str) -> Refusal:
    return Refusal(Reason.job_not_found, f"no job {job_id[:40]!r} for this tenant")


class JobBook:
    def __init__(self, admitter: Admitter, work: WorkMetrics | None = None) -> None:
        self.admitter = admitter
        self.work = work if work is not None else WorkMetrics()   # the gateway's (stages/s10_admission.py)
        self.prefix = admitter.config.store.key_prefix
        self._cached: dict[tuple[str, str], JobBudgets] = {}
        self._namespaces: dict[str, str] = {}
        self.runs = JobRuns(self)

    def now_ms(self) -> int:
        return self.admitter.now_ms()

    def namespace(self, tenant: str) -> str:
        ns = self._namespaces.get(tenant)
        if ns is None:   # asked three times per job request; tenants are few
            if len(self._namespaces) >= terms.MAX_CACHED:
                self._namespaces.clear()
            ns = self._namespaces[tenant] = tenant_namespace(self.prefix, tenant)
        return ns

    async def _call(self, method: Callable[..., Awaitable[T]], *args: object) -> T:
        """A store call through the shared store's breaker; unreachable: refused (503)."""
        guarded = self.admitter.shared
        if not guarded.allow():
            raise UNAVAILABLE
        try:
            return await guarded.call(method, *args)
        except StoreUnavailable:
            raise UNAVAILABLE from None

    async def records(self, tenant: str, job_ids: list[str]) -> list[JobRecord]:
        return await self._call(self.admitter.shared.store.jobs, self.namespace(tenant), job_ids)

    # -- looking a job up -----------------------------------------------------------------
    async def resolve(self, tenant: str, job_id: str) -> JobBudgets | Refusal:
        """The job a request names (terms cached per replica: they never change)."""
        ns = self.namespace(tenant)
        cached = self._cached.get((ns, job_id))
        if cached is not None:
            return cached
        if not terms.well_formed(job_id):
            return not_found(job_id)
        try:
            [record] = await self.records(tenant, [job_id])
        except Refusal as refusal:
            return refusal
        if record.value is None or record.meta is None:
            return not_found(job_id)
        return self._remember(ns, terms.decode_meta(record.meta))

    def _remember(self, ns: str, meta: JobMeta) -> JobBudgets:
        if len(self._cached) >= terms.MAX_CACHED:
            self._cached.clear()
        job = self._cached[(ns, meta.id)] = JobBudgets(meta)
        return job

    def forget(self, tenant: str, job_id: str) -> None:
        self._cached.pop((self.namespace(tenant), job_id), None)

    # -- creating ---------------------------------------------------------------------------
    async def create(self, tenant: str, plan: PlanConfig, body: JobRequest) -> JobMeta | Refusal:
        refusal = _check_terms(plan, body)
        if refusal is not None:
            return refusal
        if body.budget_usd is None:
            assert body.budget_tokens is not None   # _check_terms: exactly one of the two
            unit, budget = TOKENS, body.budget_tokens
        else:
            unit, budget = COST, policy.micro_usd(body.budget_usd)
        now_ms = self.admitter.now_ms()
        deadline = now_ms + int((body.max_seconds or plan.max_job_seconds) * 1000)
        p: JobMeta | None = None   # the parent job's terms
        if body.parent is not None:
            parent = await self.resolve(tenant, body.parent)
            if isinstance(parent, Refusal):
                return Refusal(parent.reason, parent.message, param="parent") if parent.reason is Reason.job_not_found \
                    else parent
            if len(parent.meta.chain) + 2 > terms.MAX_DEPTH:
                return Refusal(Reason.invalid_field, f"jobs nest at most {terms.MAX_DEPTH} deep", param="parent")
            if parent.meta.unit != unit:   # carving compares amounts: one unit down a tree
                return Refusal(Reason.invalid_field, f"job {parent.meta.id} is budgeted in "
                                                     f"{_UNIT_FIELD[parent.meta.unit]}: a child job is too",
                               param=_UNIT_FIELD[unit])
            deadline = min(deadline, parent.meta.deadline_ms)   # a child never outlives its parent
            p = parent.meta
        meta = JobMeta(terms.new_id(), budget, now_ms, deadline, body.max_attempts, body.max_children,
                       p.id if p else None, (p.id, *p.chain) if p else (), unit)
        call = JobCreate(self.namespace(tenant), meta.id, now_ms, deadline, meta.budget,
                         Limits(plan.jobs_per_minute, plan.max_open_jobs), terms.encode_meta(meta),
                         p.id if p else "", p.budget if p else 0, (p.max_children or 0) if p else 0,
                         p.chain if p else ())
        status, retry_ms = await self._call(self.admitter.shared.store.create_job, call)
        if status == job_policy.CREATED:
            self._remember(call.namespace, meta)
            self.work.job_event(tenant, "created")
            return meta
        return await self._creation_refused(tenant, plan, p, body, status, retry_ms)

    async def _creation_refused(self, tenant: str, plan: PlanConfig, parent: JobMeta | None, body: JobRequest,
                                status: int, retry_ms: int) -> Refusal:
        if status == job_policy.RATE:
            wait = max(1, -(-retry_ms // 1000))
            return Refusal(Reason.rate_limited, f"this plan creates at most {plan.jobs_per_minute} jobs a minute; "
                                                f"retry after {wait}s", headers=((b"retry-after", b"%d" % wait),))
        if status == job_policy.TOO_MANY_OPEN:
            return Refusal(Reason.concurrency_limit, f"this tenant has {plan.max_open_jobs} open jobs, the plan's "
                                                     "max_open_jobs; cancel one or wait for one to end",
                           headers=((b"retry-after", b"1"),))   # retryable once one ends
        assert parent is not None
        if status == job_policy.PARENT_MISSING:
            self.forget(tenant, parent.id)
            return Refusal(not_found(parent.id).reason, not_found(parent.id).message, param="parent")
        [record, *ancestors] = await self.records(tenant, [parent.id, *parent.chain])
        value = job_value(record)
        if status == job_policy.PARENT_CLOSED:
            return _closed(parent, value, [job_value(a) for a in ancestors], self.admitter.now_ms(), "children")
        if status == job_policy.PARENT_CHILDREN:
            return Refusal(Reason.job_budget_exhausted, f"job {parent.id} already has its {parent.max_children} "
                                                        "children (max_children)", param="parent", headers=_TERMINAL)
        left = parent.budget - value.used if value is not None else 0
        field = _UNIT_FIELD[parent.unit]
        return Refusal(Reason.job_budget_exhausted, f"job {parent.id} has {parent.amount(max(left, 0))} of its "
                                                    f"{parent.amount(parent.budget)} left to carve, fewer than "
                                                    f"{field} {getattr(body, field)}",
                       param=field, headers=_TERMINAL)

    # -- showing and cancelling ---------------------------------------------------------------
    async def view(self, tenant: str, job_id: str) -> dict[str, Any] | Refusal:
        job = await self.resolve(tenant, job_id)
        if isinstance(job, Refusal):
            return job
        meta = job.meta
        [record, *ancestors] = await self.records(tenant, [meta.id, *meta.chain])
        if record.value is None:
            self.forget(tenant, meta.id)
            return not_found(job_id)
        state = job_policy.state_name(job_value(record), [job_value(a) for a in ancestors], self.admitter.now_ms())
        return terms.public(meta, record, state)

    async def cancel(self, tenant: str, job_id: str) -> dict[str, Any] | Refusal:
        """Cancel a job and its whole subtree: children first, each handing its unused
        allowance back to its parent; then end this replica's open requests of them (other
        replicas notice within a tick of their watchers, runs.py)."""
        job = await self.resolve(tenant, job_id)
        if isinstance(job, Refusal):
            return job
        subtree = await self._subtree(tenant, job.meta)
        at = {meta.id: i for i, meta in enumerate(subtree)}
        if job.meta.parent is not None:
            at[job.meta.parent] = len(subtree)   # takes back the unused allowance it carved out
        closing = [(m.id, m.budget, at.get(m.parent, -1) if m.parent is not None else -1) for m in subtree]
        if job.meta.parent is not None:
            closing.append((job.meta.parent, -1, -1))
        changed = await self._call(self.admitter.shared.store.close_jobs, self.namespace(tenant), closing, CANCELLED)
        for _ in range(changed):
            self.work.job_event(tenant, "cancelled")
        self.runs.stop(self.namespace(tenant), {m.id for m in subtree}, Reason.job_cancelled)
        return await self.view(tenant, job_id)

    async def _subtree(self, tenant: str, root: JobMeta) -> list[JobMeta]:
        """The job and its descendants, every child before its parent (one read per level)."""
        levels = [[root]]
        while levels[-1] and len(levels) < terms.MAX_DEPTH:
            ids = [child for meta in levels[-1] for child in (await self.records(tenant, [meta.id]))[0].children]
            records = await self.records(tenant, ids) if ids else []
            levels.append([terms.decode_meta(r.meta) for r in records if r.meta is not None])
        return [meta for level in reversed(levels) for meta in level]

    # -- a request's refusal and its dispatch ----------------------------------------------------
    async def refused(self, tenant: str, job: JobBudgets, needed: int,
                      headers: list[tuple[bytes, bytes]]) -> Refusal:
        """Why a job refused a request (read back, one call), with how much of it completed;
        a job whose budget or attempts ran out moves to ``exhausted``: terminal."""
        meta = job.meta
        records = await self.records(tenant, [meta.id, *meta.chain])
        own, ancestors = job_value(records[0]), [job_value(r) for r in records[1:]]
        now_ms = self.admitter.now_ms()
        if own is None:
            self.forget(tenant, meta.id)
            return not_found(meta.id)
        if own.state == CANCELLED or now_ms >= own.deadline_ms or any(job_policy.usable(a, now_ms) for a in ancestors):
            return _closed(meta, own, ancestors, now_ms, "requests", headers)
        if own.state != EXHAUSTED:
            changed = await self._call(self.admitter.shared.store.close_jobs, self.namespace(tenant),
                                       [(meta.id, meta.budget, -1)], EXHAUSTED)
            if changed:
                self.work.job_event(tenant, "exhausted")
        why = (f"its {meta.max_attempts} attempts are used" if meta.max_attempts and own.attempts >= meta.max_attempts
               else f"this request needs {meta.amount(needed)} and {meta.amount(max(meta.budget - own.used, 0))} "
                    "are left")
        return Refusal(Reason.job_budget_exhausted, f"job {meta.id} is exhausted: {why}; {_progress(meta, own)}",
                       headers=(*headers, NO_RETRY))

    async def dispatch(self, tenant: str, job: JobBudgets, reservation_id: str) -> Refusal | None:
        """Right before the request goes to a backend: still usable? (and marked dispatched)."""
        meta = job.meta
        now_ms = self.admitter.now_ms()
        why = await self._call(self.admitter.shared.store.dispatch, self.namespace(tenant), reservation_id,
                               [meta.id, *meta.chain], now_ms)
        if why == job_policy.DISPATCH_OK:
            return None
        records = await self.records(tenant, [meta.id, *meta.chain])
        return _closed(meta, job_value(records[0]), [job_value(r) for r in records[1:]], now_ms, "requests")


def _check_terms(plan: PlanConfig, body: JobRequest) -> Refusal | None:
    if plan.max_open_jobs == 0:
        return Refusal(Reason.feature_not_entitled, "this plan has no agent jobs (max_open_jobs: 0)")
    if (body.budget_tokens is None) == (body.budget_usd is None):
        return Refusal(Reason.invalid_field, "a job has a budget in tokens or in USD: give exactly one of "
                                             "budget_tokens and budget_usd", param="budget_tokens")
    if body.budget_tokens is not None and not 1 <= body.budget_tokens <= plan.max_job_tokens:
        return Refusal(Reason.invalid_field, f"budget_tokens must be between 1 and this plan's max_job_tokens "
                                             f"({plan.max_job_tokens})", param="budget_tokens")
    if body.budget_usd is not None and not (0 < body.budget_usd <= plan.max_job_usd
                                            and policy.micro_usd(body.budget_usd) >= 1):
        return Refusal(Reason.invalid_field, f"budget_usd must be at least 0.000001 and at most this plan's "
                                             f"max_job_usd ({plan.max_job_usd:g})", param="budget_usd")
    if body.max_attempts is not None and body.max_attempts < 1:
        return Refusal(Reason.invalid_field, "max_attempts must be >= 1 (or absent: no limit)", param="max_attempts")
    if body.max_children is not None and body.max_children < 0:
        return Refusal(Reason.invalid_field, "max_children must be >= 0 (or absent: no limit)", param="max_children")
    if body.max_seconds is not None and not 0 < body.max_seconds <= plan.max_job_seconds:
        return Refusal(Reason.invalid_field, f"max_seconds must be > 0 and <= this plan's max_job_seconds "
                                             f"({plan.max_job_seconds:g})", param="max_seconds")
    if body.parent is not None and not terms.well_formed(body.parent):
        return Refusal(not_found(body.parent).reason, not_found(body.parent).message, param="parent")
    return None


_UNIT_FIELD = {TOKENS: "budget_tokens", COST: "budget_usd"}


def _progress(meta: JobMeta, value: JobValue) -> str:
    spent = max(value.used - value.held - value.carved, 0)
    finished = max(value.attempts - value.open, 0)
    carved = f", {meta.amount(value.carved)} carved out for children" if value.carved else ""
    return (f"{finished} of its {value.attempts} admitted attempts finished, {meta.amount(spent)} of its "
            f"{meta.amount(meta.budget)} spent, {meta.amount(value.held)} reserved by attempts still running{carved}")


def _closed(meta: JobMeta, own: JobValue | None, ancestors: list[JobValue | None], now_ms: int, what: str,
            headers: Sequence[tuple[bytes, bytes]] = ()) -> Refusal:
    """The refusal for a job (or an ancestor) that was cancelled, expired or is gone."""
    chain = [(meta.id, own), *zip(meta.chain, ancestors)]
    for job_id, value in chain:
        why = job_policy.usable(value, now_ms)
        if why == job_policy.DISPATCH_GONE:
            return not_found(job_id)
        whose = "" if job_id == meta.id else f" (an ancestor of {meta.id})"
        done = f"; {_progress(meta, own)}" if own is not None else ""
        if why == job_policy.DISPATCH_CANCELLED:
            return Refusal(Reason.job_cancelled, f"job {job_id}{whose} was cancelled: it takes no more {what}{done}",
                           headers=(*headers, NO_RETRY))
        if why == job_policy.DISPATCH_EXPIRED:
            return Refusal(Reason.job_expired, f"job {job_id}{whose} has passed its deadline: it takes no more "
                                               f"{what}{done}", headers=(*headers, NO_RETRY))
    # open but exhausted (only a job's own state refuses children)
    assert own is not None   # a job that is gone returned not_found in the loop
    return Refusal(Reason.job_budget_exhausted, f"job {meta.id} is exhausted: it takes no more {what}; "
                                                f"{_progress(meta, own)}", headers=(*headers, NO_RETRY))

