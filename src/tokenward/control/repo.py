"""Controls in the key store's database, each change written with its audit record in one
transaction (the key store's audit table: one trail for keys and enforcement).

Audit actions: ``abuse:<action>`` (an abuse action, automatic or by an operator; shadow
ones say so in their detail), ``abuse:reinstate`` (with the appeal outcome),
``abuse:exempt`` / ``abuse:unexempt``, ``tenant:pause`` / ``tenant:resume``,
``tenant:cancel_streams``.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Mapping

import msgspec
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ..keys.sql import create_tables
from ..keys.tables import key_audit
from .model import CANCEL, Control
from .tables import controls, metadata

def _control(row: Any) -> Control:
    return Control(**dict(row._mapping))


def audit_action(control: Control) -> str:
    if control.kind == "pause":
        return "tenant:pause"
    if control.kind == CANCEL:
        return "tenant:cancel_streams"
    return f"abuse:{control.kind}"


class ControlRepo:
    def __init__(self, engine: AsyncEngine, clock: Callable[[], float] = time.time) -> None:
        self.engine = engine
        self.clock = clock

    async def create_table(self) -> None:
        await create_tables(self.engine, metadata)

    async def add(self, control: Control, duration_s: float | None) -> Control:
        """Insert a control lasting ``duration_s`` from now (None: until cleared; a cancel
        event: ``until`` is its own time) and its audit record; returns it with its id."""
        now = self.clock()
        until = now if control.kind == CANCEL else (now + duration_s if duration_s is not None else None)
        values = msgspec.structs.asdict(control)
        del values["id"]
        values.update(created_at=now, until=until)
        async with self.engine.begin() as conn:
            result = await conn.execute(controls.insert().values(**values))
            key = result.inserted_primary_key
            assert key is not None   # a single-row INSERT's result always carries its primary key
            added = msgspec.structs.replace(control, id=int(key[0]), created_at=now,
                                            until=until)
            await _audit(conn, added, audit_action(added), added.reason, added.by, now, {})
        return added

    async def clear(self, where: Iterable[Any], *, by: str, reason: str, action: str,
                    appeal: str | None = None) -> list[Control]:
        """Clear every active control matching ``where`` (SQL conditions); one audit record each."""
        now = self.clock()
        condition = sa.and_(controls.c.cleared_at.is_(None), controls.c.kind != CANCEL,
                            sa.or_(controls.c.until.is_(None), controls.c.until > now), *where)
        async with self.engine.begin() as conn:
            rows = [_control(r) for r in await conn.execute(controls.select().where(condition))]
            if not rows:
                return []
            ids = [r.id for r in rows]
            await conn.execute(controls.update().where(controls.c.id.in_(ids)).values(
                cleared_at=now, cleared_by=by, cleared_reason=reason, appeal=appeal))
            cleared = [msgspec.structs.replace(r, cleared_at=now, cleared_by=by, cleared_reason=reason, appeal=appeal)
                       for r in rows]
            for row in cleared:
                await _audit(conn, row, action, reason, by, now, {"cleared": row.kind, "appeal": appeal})
        return cleared

    async def active(self) -> list[Control]:
        """Every control in force now (shadow ones included; cancel events excluded)."""
        now = self.clock()
        query = controls.select().where(controls.c.cleared_at.is_(None), controls.c.kind != CANCEL,
                                        sa.or_(controls.c.until.is_(None), controls.c.until > now))
        async with self.engine.connect() as conn:
            return [_control(r) for r in await conn.execute(query.order_by(controls.c.id))]

    async def cancels_after(self, last_id: int, since: float) -> list[Control]:
        """Cancel events newer than ``last_id`` and not older than ``since``."""
        query = controls.select().where(controls.c.kind == CANCEL, controls.c.id > last_id,
                                        controls.c.created_at >= since)
        async with self.engine.connect() as conn:
            return [_control(r) for r in await conn.execute(query.order_by(controls.c.id))]

    async def last_id(self) -> int:
        async with self.engine.connect() as conn:
            return int((await conn.execute(sa.select(sa.func.max(controls.c.id)))).scalar() or 0)

    async def history(self, tenant: str | None = None, limit: int = 200) -> list[Control]:
        query = controls.select().order_by(controls.c.id.desc()).limit(limit)
        if tenant is not None:
            query = query.where(controls.c.tenant == tenant)
        async with self.engine.connect() as conn:
            return [_control(r) for r in await conn.execute(query)]


async def _audit(conn: AsyncConnection, control: Control, action: str, reason: str, by: str, now: float,
                 extra: Mapping[str, str | None]) -> None:
    detail = {"control_id": control.id, "automatic": control.automatic, "shadow": control.shadow,
              "rule": control.rule, "signals": control.signals, "params": control.params,
              "capability": control.capability, "until": control.until, **extra}
    duration = control.until - control.created_at if control.until is not None and control.kind != CANCEL else None
    key_id = control.key_id or ""
    await conn.execute(key_audit.insert().values(
        # the audit's key id column holds an API key's id; a JWT subject is named in the scope
        key_id=key_id if len(key_id) <= 32 else "", tenant=control.tenant, action=action, reason=reason,
        scope=control.scope, duration_s=duration, reviewer=by, at=now,
        detail={k: v for k, v in detail.items() if v is not None}))


def subject(tenant: str, key_id: str | None) -> list[Any]:
    """SQL conditions: the controls on exactly this key, or on the tenant itself."""
    if key_id is None:
        return [controls.c.tenant == tenant, controls.c.key_id.is_(None)]
    return [controls.c.key_id == key_id]


def kinds(names: Iterable[str]) -> Any:
    return controls.c.kind.in_(list(names))


def capability(name: str) -> Any:
    return controls.c.capability == name

