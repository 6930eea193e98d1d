"""The key store interface, and ``open_keystore(url)`` which picks the implementation.

One interface, one SQL implementation on SQLAlchemy's async engine: SQLite (aiosqlite,
the default: a file, zero setup) or PostgreSQL (asyncpg, for several replicas). Every
lifecycle change writes its audit record in the same transaction as the change.
"""

from __future__ import annotations

import builtins  # the classes below define a method named list, which hides the builtin in later annotations
import time
from typing import TYPE_CHECKING, Callable, Protocol, Sequence

from ..errors import ConfigError
from ..config.key_limits import KeyLimits
from .model import AuditRecord, KeyRecord

if TYPE_CHECKING:
    from .sql import SqlKeyStore


class KeyStore(Protocol):
    async def create(self, tenant: str, *, name: str | None = None, models: Sequence[str] | None = None,
                     environments: Sequence[str] | None = None, expires_at: float | None = None,
                     reason: str | None = None, reviewer: str | None = None,
                     limits: KeyLimits | None = None) -> tuple[str, KeyRecord]:
        """A new key: (the plaintext key, shown only now; its record)."""

    async def get(self, key_id: str) -> KeyRecord | None: ...

    async def list(self, tenant: str | None = None) -> list[KeyRecord]: ...

    async def revoke(self, key_id: str, *, reason: str, reviewer: str | None = None) -> KeyRecord: ...

    async def suspend(self, key_id: str, *, duration_s: float, reason: str,
                      reviewer: str | None = None) -> KeyRecord: ...

    async def reinstate(self, key_id: str, *, reason: str, reviewer: str | None = None) -> KeyRecord: ...

    async def audit(self, key_id: str | None = None, limit: int = 1000) -> builtins.list[AuditRecord]: ...

    async def touch(self, last_used: dict[str, float]) -> None:
        """Record last-use times in one batch (never one write per request)."""

    async def close(self) -> None: ...


def engine_url(url: str) -> str:
    """The SQLAlchemy URL with the async driver: sqlite -> aiosqlite, postgresql -> asyncpg."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ConfigError("keystore.url", f"expected sqlite:///path or postgresql://..., got {url!r}")
    base = scheme.split("+", 1)[0]
    if base == "sqlite":
        return f"sqlite+aiosqlite://{rest}"
    if base in ("postgresql", "postgres"):
        return f"postgresql+asyncpg://{rest}"
    raise ConfigError("keystore.url", f"unsupported database {scheme!r}: use sqlite:/// or postgresql://")


async def open_keystore(url: str, clock: Callable[[], float] = time.time) -> SqlKeyStore:
    from .sql import SqlKeyStore

    return await SqlKeyStore.open(engine_url(url), clock=clock)
