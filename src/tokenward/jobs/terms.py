"""What a job is: its server-assigned id, the fixed terms it was created with, and the
body of ``POST /v1/jobs`` (strict: an unknown field or a wrong type is refused by name).

A job id is ``job_`` and 26 base32 characters of 16 random bytes: unguessable, and the
format alone refuses a made-up id before any store is asked. The terms never change after
creation, so each replica keeps them in a bounded cache; what changes (the counters, the
state) lives only in the store.
"""

from __future__ import annotations

import base64
import os
import re
from typing import TYPE_CHECKING, Any

import msgspec

from ..budget.limits import TenantBudget, _Spec, safe
from ..budget.policy import ANCESTOR, COST, JOB, TOKENS

if TYPE_CHECKING:
    from ..budget.policy import JobValue
    from ..budget.store import JobRecord

ID_PREFIX = "job_"
_ID = re.compile(r"job_[a-z2-7]{26}\Z")
MAX_DEPTH = 8          # a job and at most seven ancestors: one reservation stays small
MAX_CACHED = 10_000


def new_id() -> str:
    return ID_PREFIX + base64.b32encode(os.urandom(16)).decode().rstrip("=").lower()


def well_formed(job_id: str) -> bool:
    return _ID.match(job_id) is not None


def job_value(record: JobRecord) -> JobValue | None:
    """A job record's counters, or None when there is no such job."""
    return record.value


class JobRequest(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """The body of ``POST /v1/jobs``: a budget in tokens or in USD (exactly one of the two)."""

    budget_tokens: int | None = None
    budget_usd: float | None = None      # priced like the plan's spend limits (models' prices)
    max_attempts: int | None = None      # admitted requests at most; None: no limit
    max_children: int | None = None      # child jobs at most; None: no limit
    max_seconds: float | None = None     # wall-clock lifetime; None: the plan's max_job_seconds
    parent: str | None = None            # a job of the same tenant to carve the budget from


decode_request = msgspec.json.Decoder(JobRequest).decode


class JobMeta(msgspec.Struct, frozen=True):
    """A job's fixed terms, stored as JSON beside its counters (field ``j:<id>:m``)."""

    id: str
    budget: int
    created_ms: int
    deadline_ms: int
    max_attempts: int | None = None
    max_children: int | None = None
    parent: str | None = None
    chain: tuple[str, ...] = ()          # its ancestors' ids, nearest first
    unit: str = TOKENS                   # what budget counts: TOKENS, or COST (micro-USD)

    def specs(self) -> list[_Spec]:
        """Its checks, first in a reservation (the store relies on the job check being the
        first): the job itself, then every ancestor (cancelled or expired stops it)."""
        own = _Spec("job", f"j:{safe(self.id)}", JOB, self.unit, self.budget, self.max_attempts or 0)
        return [own, *(_Spec("job_ancestor", f"j:{safe(a)}", ANCESTOR, TOKENS, 0, 0) for a in self.chain)]

    def amount(self, value: int) -> str:
        """An amount of this job's unit, for a message: "22 tokens" or "$0.000022"."""
        return f"{value} tokens" if self.unit == TOKENS else f"${value / 1_000_000:.6f}"


encode_meta = msgspec.json.Encoder().encode
decode_meta = msgspec.json.Decoder(JobMeta).decode


class JobBudgets:
    """The reservation layout of a job's requests: its checks, then the tenant's (and the
    key's), built once per job and tenant layout (a new UTC day builds the tenant's anew)."""

    __slots__ = ("meta", "_for", "_joined")

    def __init__(self, meta: JobMeta) -> None:
        self.meta = meta
        self._for: TenantBudget | None = None
        self._joined: TenantBudget | None = None

    def joined(self, budget: TenantBudget) -> TenantBudget:
        if self._for is budget and self._joined is not None:
            return self._joined
        layout = budget.layout
        ns = layout.namespace
        specs = self.meta.specs() + [_Spec(name, c.key[len(ns) + 1:], c.kind, c.unit, c.p1, c.p2)
                                     for name, c in zip(budget.names, layout.checks)]
        shadow = tuple(name for name, c in zip(budget.names, layout.checks) if not c.enforce)
        joined = TenantBudget(ns, specs, shadow, budget.day, budget.plan)
        self._for, self._joined = budget, joined
        return joined


def public(meta: JobMeta, record: Any, state: str) -> dict[str, Any]:
    """``GET /v1/jobs/{id}``: the job as a caller sees it."""
    value = record.value
    used, held, carved = (value.used, value.held, value.carved) if value is not None else (0, 0, 0)
    attempts, open_ = (value.attempts, value.open) if value is not None else (0, 0)
    amounts = {"budget": meta.budget, "reserved": held, "spent": max(used - held - carved, 0), "carved": carved,
               "remaining": max(meta.budget - used, 0)}
    if meta.unit == COST:   # the *_tokens fields stay, empty: a job counts one unit
        budget = {f"{k}_tokens": None for k in amounts} | {f"{k}_usd": v / 1_000_000 for k, v in amounts.items()}
    else:
        budget = {f"{k}_tokens": v for k, v in amounts.items()}
    return {
        "id": meta.id, "object": "job", "state": state, "unit": "usd" if meta.unit == COST else "tokens", **budget,
        "attempts": attempts, "open_attempts": open_, "finished_attempts": max(attempts - open_, 0),
        "max_attempts": meta.max_attempts, "children": len(record.children), "child_ids": list(record.children),
        "max_children": meta.max_children, "parent": meta.parent,
        "created_at": meta.created_ms // 1000, "expires_at": meta.deadline_ms // 1000,
    }
