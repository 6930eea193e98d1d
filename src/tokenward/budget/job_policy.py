"""Agent jobs' lifecycle arithmetic, pure: no I/O and no clock (``now_ms`` is passed in).

A request's own charge against a job is a ``J`` check of ``policy.reserve`` (and its
ancestors ``A`` checks), so it joins the tenant's reservation in one atomic step. What
happens outside requests is here: creating a job (a child carves its budget out of its
parent's remaining allowance), closing jobs (cancelled, with the children first and each
one's unused allowance handed back to its parent; or marked exhausted), the check made
right before a request is sent to a backend, and the state a caller is shown.
``lua/job_create.lua``, ``job_close.lua`` and ``job_dispatch.lua`` mirror these step for
step, and the contract suite runs both stores through the same cases.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

from . import policy
from .policy import CANCELLED, EXHAUSTED, OPEN, JobValue

# create answers (the Lua scripts return the same numbers)
CREATED, RATE, TOO_MANY_OPEN, PARENT_MISSING, PARENT_CLOSED, PARENT_CHILDREN, PARENT_BUDGET = 1, 2, 3, 4, 5, 6, 7
# dispatch answers
DISPATCH_OK, DISPATCH_GONE, DISPATCH_CANCELLED, DISPATCH_EXPIRED = 1, 4, 2, 3
# A job's values are dropped this long after its deadline (the sweep), so a tenant that
# creates jobs all day does not grow its namespace without end.
KEEP_AFTER_DEADLINE_MS = 86_400_000


class Limits(NamedTuple):
    """What the plan lets one tenant create: the ``jobs_per_minute`` bucket and ``max_open_jobs``."""

    per_minute: int
    max_open: int


class Parent(NamedTuple):
    """The parent a child is created under: its stored value and its fixed terms."""

    value: JobValue | None
    budget: int
    max_children: int          # 0: no limit
    ancestors: tuple[JobValue | None, ...]   # its own ancestors, nearest first


class Created(NamedTuple):
    status: int
    retry_ms: int                      # RATE: the honest wait; otherwise 0 (or -1: none)
    bucket: tuple[int, int] | None     # the jobs_per_minute bucket after the call
    parent: JobValue | None            # the parent after the call (carved)
    job: JobValue | None               # the new job's value


def new_job(deadline_ms: int) -> JobValue:
    return JobValue(0, 0, 0, 0, 0, 0, OPEN, deadline_ms)


def usable(job: JobValue | None, now_ms: int) -> int:
    """0 if a job may still run requests (as an ancestor: not cancelled, before its
    deadline), else why not: DISPATCH_GONE, DISPATCH_CANCELLED or DISPATCH_EXPIRED."""
    if job is None:
        return DISPATCH_GONE
    if job.state == CANCELLED:
        return DISPATCH_CANCELLED
    if now_ms >= job.deadline_ms:
        return DISPATCH_EXPIRED
    return 0


def create(parent: Parent | None, budget: int, deadline_ms: int, open_jobs: int, bucket: tuple[int, int] | None,
           limits: Limits, now_ms: int) -> Created:
    """Create a job (all or nothing): terminal answers about the parent first, then the
    tenant's rate of creation and its open jobs."""
    carved = None
    if parent is not None:
        value = parent.value
        if value is None:
            return Created(PARENT_MISSING, -1, None, None, None)
        if value.state != OPEN or now_ms >= value.deadline_ms or any(usable(a, now_ms) for a in parent.ancestors):
            return Created(PARENT_CLOSED, -1, None, None, None)
        if parent.max_children > 0 and value.children >= parent.max_children:
            return Created(PARENT_CHILDREN, -1, None, None, None)
        if value.used + budget > parent.budget:
            return Created(PARENT_BUDGET, -1, None, None, None)
        carved = value._replace(used=value.used + budget, carved=value.carved + budget, children=value.children + 1)
    cap, rate = limits.per_minute * policy.SCALE, limits.per_minute
    level, ts = policy.refill(bucket, cap, rate, now_ms)
    if level < policy.SCALE:
        return Created(RATE, policy.wait_ms(policy.SCALE - level, rate), None, None, None)
    if open_jobs >= limits.max_open:
        return Created(TOO_MANY_OPEN, -1, None, None, None)
    return Created(CREATED, 0, (level - policy.SCALE, ts), carved, new_job(deadline_ms))


class Closing(NamedTuple):
    """One job to close: its value, its budget, and where its parent is in the same call
    (an index into the list, or -1: not in it, or it has none). A budget below 0: the job
    is in the list only to take back what its cancelled children hand back, not closed."""

    value: JobValue | None
    budget: int
    parent: int


def close(jobs: Sequence[Closing], state: int) -> tuple[list[JobValue | None], int]:
    """New values of the jobs (in the order given: children before their parents), and
    how many changed.

    ``CANCELLED``: every job not cancelled yet is; each hands its unused allowance
    (budget - used) back to its parent, which carved it out. ``EXHAUSTED``: an open job
    becomes exhausted (it keeps its allowance: its children's carves stay theirs)."""
    values = [j.value for j in jobs]
    changed = 0
    for i, job in enumerate(jobs):
        value = values[i]
        if value is None or job.budget < 0:
            continue
        if state == EXHAUSTED:
            if value.state == OPEN:
                values[i] = value._replace(state=EXHAUSTED)
                changed += 1
            continue
        if value.state == CANCELLED:
            continue
        values[i] = value._replace(state=CANCELLED)
        changed += 1
        back = max(job.budget - value.used, 0)
        parent = values[job.parent] if job.parent >= 0 else None
        if back and parent is not None:
            values[job.parent] = parent._replace(used=max(parent.used - back, 0), carved=max(parent.carved - back, 0))
    return values, changed


def state_name(value: JobValue | None, ancestors: Sequence[JobValue | None], now_ms: int) -> str:
    """What a caller is shown: ``open``, ``exhausted``, ``cancelled`` (itself, or an
    ancestor: the cascade), ``expired`` (its deadline or an ancestor's passed), ``gone``."""
    if value is None:
        return "gone"
    if value.state == CANCELLED or any(a is not None and a.state == CANCELLED for a in ancestors):
        return "cancelled"
    if now_ms >= value.deadline_ms or any(usable(a, now_ms) for a in ancestors):
        return "expired"
    return "exhausted" if value.state == EXHAUSTED else "open"


def droppable(value: JobValue, now_ms: int) -> bool:
    """The sweep drops a job's values this long after its deadline (nothing can use them)."""
    return now_ms - value.deadline_ms >= KEEP_AFTER_DEADLINE_MS
