"""What a tenant's budgets hold now, in the units an operator thinks in: tokens available
(refilled to this moment), slots held, what today and this month have spent. One report,
read from whichever store holds the budgets: ``tokenward budget show`` reads the shared
Redis itself, and asks a running gateway's admin API (``GET /admin/budget/{tenant}``) when
the budgets live in that gateway's memory."""

from __future__ import annotations

import datetime as dt
from typing import Any, cast

from . import policy
from .limits import TenantBudget
from .policy import Check, Stored
from .store import BudgetStore

_UNITS = {"t": "tokens", "c": "micro-USD", "r": "requests", "s": "slots"}


def describe(name: str, check: Check, value: Stored, now_ms: int) -> dict[str, Any]:
    """One limit's row: its kind, unit, what it holds now and its bound."""
    row: dict[str, Any] = {"limit": name, "enforced": bool(check.enforce)}
    if check.kind in (policy.BUCKET, policy.SOFT):
        level = policy.refill(cast("policy.BucketState | None", value), check.p1, check.p2, now_ms)[0]
        row.update(kind="rate", unit=_UNITS[check.unit], available=level // policy.SCALE,
                   capacity=check.p1 // policy.SCALE, per_minute=check.p2,
                   full_in_ms=policy.full_after_ms(level, check.p1, check.p2))
    elif check.kind == policy.GAUGE:
        row.update(kind="gauge", unit=_UNITS[check.unit], held=int(cast("int | None", value) or 0), limit_value=check.p1)
    else:
        row.update(kind="spend", unit="micro-USD", spent=int(cast("int | None", value) or 0), cap=check.p1)
    return row


async def budget_report(store: BudgetStore, budget: TenantBudget, tenant: str, key_id: str | None,
                        now_ms: int) -> dict[str, Any]:
    """Every limit of ``budget`` as the store holds it now, and the open reservations."""
    layout = budget.layout
    rows = [describe(name, check, await store.value(check.key), now_ms)
            for name, check in zip(budget.names, layout.checks)]
    return {"tenant": tenant, "namespace": layout.namespace, "key_id": key_id,
            "at": dt.datetime.fromtimestamp(now_ms / 1000, dt.timezone.utc).isoformat(timespec="seconds"),
            "open_reservations": await store.open_reservations(layout.leases_key), "limits": rows}
