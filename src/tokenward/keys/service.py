"""Key lifecycle operations with their side effects: store, then announce the change.

The CLI and the admin API both go through ``KeyService``, so a revoke or suspend is
announced the same way whoever does it: the local cache drops the key at once and other
replicas hear it over Redis (when a Redis store is configured).
"""

from __future__ import annotations

import builtins  # the classes below define a method named list, which hides the builtin in later annotations
import logging
from typing import TYPE_CHECKING, Awaitable, Callable, Sequence

from ..config.key_limits import KeyLimits
from .model import AuditRecord, KeyRecord
from .store import KeyStore

if TYPE_CHECKING:
    from ..config.schema import Config

log = logging.getLogger("tokenward.keys")

Announce = Callable[[str], Awaitable[None]]


class KeyService:
    def __init__(self, store: KeyStore, announce: Announce | None = None) -> None:
        self.store = store
        self._announce = announce

    async def create(self, tenant: str, *, name: str | None = None, models: Sequence[str] | None = None,
                     environments: Sequence[str] | None = None, expires_at: float | None = None,
                     reason: str | None = None, reviewer: str | None = None,
                     limits: KeyLimits | None = None) -> tuple[str, KeyRecord]:
        return await self.store.create(tenant, name=name, models=models, environments=environments,
                                       expires_at=expires_at, reason=reason, reviewer=reviewer, limits=limits)

    async def get(self, key_id: str) -> KeyRecord | None:
        return await self.store.get(key_id)

    async def list(self, tenant: str | None = None) -> list[KeyRecord]:
        return await self.store.list(tenant)

    async def audit(self, key_id: str | None = None, limit: int = 1000) -> builtins.list[AuditRecord]:
        return await self.store.audit(key_id, limit)

    async def revoke(self, key_id: str, *, reason: str, reviewer: str | None = None) -> KeyRecord:
        record = await self.store.revoke(key_id, reason=reason, reviewer=reviewer)
        await self._changed(key_id)
        return record

    async def suspend(self, key_id: str, *, duration_s: float, reason: str,
                      reviewer: str | None = None) -> KeyRecord:
        record = await self.store.suspend(key_id, duration_s=duration_s, reason=reason, reviewer=reviewer)
        await self._changed(key_id)
        return record

    async def reinstate(self, key_id: str, *, reason: str, reviewer: str | None = None) -> KeyRecord:
        record = await self.store.reinstate(key_id, reason=reason, reviewer=reviewer)
        await self._changed(key_id)
        return record

    async def _changed(self, key_id: str) -> None:
        if self._announce is None:
            return
        try:
            await self._announce(key_id)
        except Exception as exc:
            # The change is committed; replicas still see it when their short cache TTL ends.
            log.warning("key %s changed but the change could not be announced: %s", key_id, exc)


def check_new_key(config: Config, tenant: str, models: Sequence[str] | None,
                  limits: KeyLimits | None = None) -> None:
    """Refuse a key that could never work: unknown tenant, models outside the tenant's plan,
    or limits of its own that are not below the plan's."""
    from ..config.key_limits import above_plan
    from ..config.loader import effective_plan
    from .model import KeyStoreError

    if tenant not in config.tenants:
        raise KeyStoreError(f"unknown tenant {tenant!r}")
    if limits is not None:
        above = above_plan(limits, effective_plan(config, tenant))
        if above:
            raise KeyStoreError(f"a key's own limits must be below its plan's ({config.tenants[tenant].plan}): "
                                + "; ".join(above))
    if models is None:
        return
    if not models:
        raise KeyStoreError("a key scoped to no models could never be used")
    plan_models = set(effective_plan(config, tenant).models)
    outside = [m for m in models if m not in plan_models]
    if outside:
        raise KeyStoreError(f"models not in tenant {tenant}'s plan: {', '.join(outside)}")
