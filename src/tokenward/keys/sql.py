"""``KeyStore`` on SQLAlchemy's async engine: SQLite via aiosqlite, PostgreSQL via asyncpg."""

from __future__ import annotations

import asyncio
import builtins  # the classes below define a method named list, which hides the builtin in later annotations
import os
import time
from typing import Any, Callable, Sequence

import msgspec
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from ..config.key_limits import KeyLimits
from . import format as keyformat
from .model import (
    ACTIVE,
    REVOKED,
    SUSPENDED,
    AuditRecord,
    KeyNotFound,
    KeyRecord,
    KeyStateError,
)
from .tables import api_keys, key_audit, metadata

_KEY_COLUMNS = tuple(api_keys.c)


def _record(row: Any) -> KeyRecord:
    m = row._mapping
    models = m["models"]
    envs = m["environments"]
    return KeyRecord(
        id=m["id"], tenant=m["tenant"], name=m["name"],
        models=tuple(models) if models is not None else None,
        environments=tuple(envs) if envs is not None else None,
        status=m["status"], suspended_until=m["suspended_until"], expires_at=m["expires_at"],
        created_at=m["created_at"], last_used_at=m["last_used_at"], secret_hash=m["secret_hash"],
        daily_spend_usd=m["daily_spend_usd"], monthly_spend_usd=m["monthly_spend_usd"],
        tokens_per_minute=m["tokens_per_minute"],
    )


def _audit(row: Any) -> AuditRecord:
    return AuditRecord(**dict(row._mapping))


def _sqlite_setup(engine: AsyncEngine) -> None:
    @sa.event.listens_for(engine.sync_engine, "connect")
    def _pragmas(dbapi_conn: Any, _record: Any) -> None:   # DBAPI objects: untyped by design
        cursor = dbapi_conn.cursor()
        # WAL: the gateway keeps reading while the CLI writes in another process.
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=10000")
        cursor.close()


def _sqlite_path(url: str) -> str | None:
    rest = url.split("://", 1)[1]
    if not rest.startswith("/") or rest in ("/", "/:memory:"):
        return None
    return rest[1:].split("?", 1)[0] or None


class SqlKeyStore:
    def __init__(self, engine: AsyncEngine, clock: Callable[[], float]) -> None:
        self.engine = engine
        self.clock = clock

    @classmethod
    async def open(cls, url: str, clock: Callable[[], float] = time.time) -> SqlKeyStore:
        sqlite = url.startswith("sqlite")
        if sqlite:
            path = _sqlite_path(url)
            if path:
                os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            engine = create_async_engine(url, connect_args={"timeout": 10})
            _sqlite_setup(engine)
        else:
            engine = create_async_engine(url, pool_size=5, max_overflow=5, pool_pre_ping=True)
        store = cls(engine, clock)
        try:
            await store._create_tables()
        except BaseException:
            await engine.dispose()
            raise
        if sqlite and path:
            os.chmod(path, 0o600)
        return store

    async def _create_tables(self) -> None:
        await create_tables(self.engine, metadata)
        await add_missing_columns(self.engine, api_keys)

    async def close(self) -> None:
        await self.engine.dispose()

    async def create(self, tenant: str, *, name: str | None = None, models: Sequence[str] | None = None,
                     environments: Sequence[str] | None = None, expires_at: float | None = None,
                     reason: str | None = None, reviewer: str | None = None,
                     limits: KeyLimits | None = None) -> tuple[str, KeyRecord]:
        plaintext, key_id, secret_hash = keyformat.new_key()
        now = self.clock()
        own = limits or KeyLimits()
        record = KeyRecord(
            id=key_id, tenant=tenant, name=name,
            models=tuple(models) if models is not None else None,
            environments=tuple(environments) if environments is not None else None,
            status=ACTIVE, expires_at=expires_at, created_at=now, secret_hash=secret_hash,
            daily_spend_usd=own.daily_spend_usd, monthly_spend_usd=own.monthly_spend_usd,
            tokens_per_minute=own.tokens_per_minute,
        )
        values = {c.name: getattr(record, c.name) for c in _KEY_COLUMNS}
        values["models"] = list(record.models) if record.models is not None else None
        values["environments"] = list(record.environments) if record.environments is not None else None
        detail = {"models": values["models"], "environments": values["environments"], "expires_at": expires_at,
                  "name": name}
        if limits is not None:
            detail["limits"] = msgspec.structs.asdict(limits)
        async with self.engine.begin() as conn:
            await conn.execute(api_keys.insert().values(**values))
            await self._write_audit(conn, record, "create", reason, reviewer, now, None, detail)
        return plaintext, record

    async def get(self, key_id: str) -> KeyRecord | None:
        async with self.engine.connect() as conn:
            row = (await conn.execute(api_keys.select().where(api_keys.c.id == key_id))).first()
        return _record(row) if row is not None else None

    async def list(self, tenant: str | None = None) -> list[KeyRecord]:
        query = api_keys.select().order_by(api_keys.c.created_at, api_keys.c.id)
        if tenant is not None:
            query = query.where(api_keys.c.tenant == tenant)
        async with self.engine.connect() as conn:
            return [_record(row) for row in await conn.execute(query)]

    async def revoke(self, key_id: str, *, reason: str, reviewer: str | None = None) -> KeyRecord:
        def change(record: KeyRecord, now: float) -> dict[str, Any]:
            if record.status == REVOKED:
                raise KeyStateError(f"key {key_id} is already revoked")
            return {"status": REVOKED, "suspended_until": None}

        return await self._change(key_id, "revoke", reason, reviewer, None, change)

    async def suspend(self, key_id: str, *, duration_s: float, reason: str,
                      reviewer: str | None = None) -> KeyRecord:
        if not duration_s > 0:
            raise KeyStateError("a suspension needs a positive duration")

        def change(record: KeyRecord, now: float) -> dict[str, Any]:
            if record.status == REVOKED:
                raise KeyStateError(f"key {key_id} is revoked; a revoked key cannot be suspended")
            return {"status": SUSPENDED, "suspended_until": now + duration_s}

        return await self._change(key_id, "suspend", reason, reviewer, duration_s, change)

    async def reinstate(self, key_id: str, *, reason: str, reviewer: str | None = None) -> KeyRecord:
        def change(record: KeyRecord, now: float) -> dict[str, Any]:
            if record.status == ACTIVE:
                raise KeyStateError(f"key {key_id} is not suspended or revoked")
            return {"status": ACTIVE, "suspended_until": None}

        return await self._change(key_id, "reinstate", reason, reviewer, None, change)

    async def _change(self, key_id: str, action: str, reason: str, reviewer: str | None,
                      duration_s: float | None, change: Callable[[KeyRecord, float], dict[str, Any]]) -> KeyRecord:
        async with self.engine.begin() as conn:
            query = api_keys.select().where(api_keys.c.id == key_id)
            if conn.dialect.name == "postgresql":
                query = query.with_for_update()
            row = (await conn.execute(query)).first()
            if row is None:
                raise KeyNotFound(key_id)
            now = self.clock()
            record = _record(row)
            values = change(record, now)
            await conn.execute(api_keys.update().where(api_keys.c.id == key_id).values(**values))
            updated = KeyRecord(**{**{f: getattr(record, f) for f in record.__struct_fields__}, **values})
            await self._write_audit(conn, updated, action, reason, reviewer, now, duration_s,
                                    {"status": updated.status, "suspended_until": updated.suspended_until})
        return updated

    async def _write_audit(self, conn: AsyncConnection, record: KeyRecord, action: str, reason: str | None,
                           reviewer: str | None, now: float, duration_s: float | None, detail: dict[str, Any]) -> None:
        await conn.execute(key_audit.insert().values(
            key_id=record.id, tenant=record.tenant, action=action, reason=reason, scope=f"key:{record.id}",
            duration_s=duration_s, reviewer=reviewer, at=now, detail=detail))

    async def audit(self, key_id: str | None = None, limit: int = 1000) -> builtins.list[AuditRecord]:
        query = key_audit.select().order_by(key_audit.c.id).limit(limit)
        if key_id is not None:
            query = query.where(key_audit.c.key_id == key_id)
        async with self.engine.connect() as conn:
            return [_audit(row) for row in await conn.execute(query)]

    async def touch(self, last_used: dict[str, float]) -> None:
        if not last_used:
            return
        stmt = (api_keys.update().where(api_keys.c.id == sa.bindparam("key_id"))
                .values(last_used_at=sa.bindparam("ts")))
        params = [{"key_id": key_id, "ts": ts} for key_id, ts in sorted(last_used.items())]
        async with self.engine.begin() as conn:
            await conn.execute(stmt, params)


async def add_missing_columns(engine: AsyncEngine, table: sa.Table) -> None:
    """ALTER TABLE ADD COLUMN for the columns a table made by an earlier version lacks (all
    nullable: existing rows read as None). Replicas opening at once may both try; PostgreSQL's
    IF NOT EXISTS makes that harmless, and SQLite serializes its writers."""
    def missing(conn: sa.Connection) -> list[sa.Column[Any]]:
        have = {c["name"] for c in sa.inspect(conn).get_columns(table.name)}
        return [c for c in table.columns if c.name not in have]

    async with engine.begin() as conn:
        columns = await conn.run_sync(missing)
        postgres = conn.dialect.name == "postgresql"
        for column in columns:
            kind = column.type.compile(dialect=conn.dialect)
            guard = "IF NOT EXISTS " if postgres else ""
            await conn.execute(sa.text(f'ALTER TABLE {table.name} ADD COLUMN {guard}"{column.name}" {kind}'))


async def create_tables(engine: AsyncEngine, tables: sa.MetaData) -> None:
    """CREATE TABLE IF NOT EXISTS for ``tables``; replicas starting at once may race on it,
    and the loser retries."""
    for attempt in range(3):
        try:
            async with engine.begin() as conn:
                await conn.run_sync(tables.create_all)
            return
        except sa.exc.DBAPIError:
            if attempt == 2:
                raise
            await asyncio.sleep(0.1 * (attempt + 1))
