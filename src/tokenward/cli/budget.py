"""``tokenward budget show``: what a tenant's budgets hold now, read from the shared store.

The Redis store keeps a namespace's values packed in one hash (docs/budget.md), which
``redis-cli`` cannot show in units an operator thinks in; this reads them through the
store and prints them as the gateway sees them: tokens available now (refilled to this
moment), open streams, what today and this month have spent.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, cast

import typer

from .options import config_option

if TYPE_CHECKING:
    from ..budget.policy import Check, Stored
    from ..config.schema import Config, PlanConfig

budget_app = typer.Typer(no_args_is_help=True, help="Read a tenant's budgets from the shared store (Redis).")

_UNITS = {"t": "tokens", "c": "micro-USD", "r": "requests", "s": "slots"}


def _describe(name: str, check: Check, value: Stored, now_ms: int) -> dict[str, Any]:
    from ..budget import policy

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


def _line(row: dict[str, Any]) -> str:
    shadow = "" if row["enforced"] else "  (shadow)"
    if row["kind"] == "rate":
        return (f"  {row['limit']:<16}{row['available']:>14,} of {row['capacity']:,} {row['unit']} available"
                f" ({row['per_minute']:,}/min; full in {row['full_in_ms'] / 1000:.1f} s){shadow}")
    if row["kind"] == "gauge":
        return f"  {row['limit']:<16}{row['held']:>14,} of {row['limit_value']:,} {row['unit']} held{shadow}"
    from ..budget.policy import usd_text

    return f"  {row['limit']:<16}{usd_text(row['spent']):>14} of {usd_text(row['cap'])} spent{shadow}"


async def _read(cfg: Config, tenant: str, plan: PlanConfig, key_id: str | None) -> dict[str, Any]:
    from ..budget.limits import Budgets
    from ..stages.s60_admit import open_store

    store = open_store(cfg)
    now_ms = int(time.time() * 1000)
    try:
        budget = Budgets(cfg).tenant(tenant, plan, key_id, now_ms)
        layout = budget.layout
        rows = [_describe(name, check, await store.value(check.key), now_ms)
                for name, check in zip(budget.names, layout.checks)]
        return {"tenant": tenant, "namespace": layout.namespace, "key_id": key_id,
                "at": dt.datetime.fromtimestamp(now_ms / 1000, dt.timezone.utc).isoformat(timespec="seconds"),
                "open_reservations": await store.open_reservations(layout.leases_key), "limits": rows}
    finally:
        await store.close()


@budget_app.command("show")
def show(
    config: Path = config_option(),
    tenant: str = typer.Option(..., "--tenant", help="a tenant of the config"),
    key_id: Optional[str] = typer.Option(None, "--key", help="a key id, for the plan's per-key limits"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object instead of a table"),
) -> None:
    """What a tenant's budgets hold now: tokens available, open streams, spend."""
    from ..budget.store import StoreUnavailable
    from ..config import load_config
    from ..config.loader import effective_plan
    from ..errors import ConfigError

    try:
        cfg = load_config(config)
    except ConfigError as exc:
        print(f"{config}: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    if tenant not in cfg.tenants:
        print(f"{config}: no tenant {tenant!r} (tenants: {', '.join(sorted(cfg.tenants)) or 'none'})", file=sys.stderr)
        raise typer.Exit(2)
    if cfg.store.url == "memory":
        print("store.url is memory: the budgets live inside the gateway process, not in a store this "
              "command can read (set store.url or TOKENWARD_STORE_URL to the shared Redis)", file=sys.stderr)
        raise typer.Exit(1)
    try:
        report = asyncio.run(_read(cfg, tenant, effective_plan(cfg, tenant), key_id))
    except StoreUnavailable as exc:
        print(str(exc), file=sys.stderr)
        raise typer.Exit(1) from None
    if as_json:
        print(json.dumps(report))
        return
    key = f", key {key_id}" if key_id else ""
    print(f"tenant {tenant} ({cfg.tenants[tenant].plan}{key}), {report['namespace']}, at {report['at']}")
    for row in report["limits"]:
        print(_line(row))
    print(f"  open reservations: {report['open_reservations']}")
