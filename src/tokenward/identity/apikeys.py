"""API-key verification: parse, look up by the embedded id (cached), compare in constant time.

A cache entry holds what each request needs, computed once per lookup: the stored hash
as bytes, the state fields, and the ready ``Principal`` (tenant, plan, scopes). The warm
path is one dict lookup, one HMAC and a few comparisons.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Callable

from ..config.schema import PlanConfig
from ..errors import Reason, Refusal
from ..keys import format as keyformat
from ..keys.cache import MISS, KeyCache
from ..keys.last_used import LastUsedBatcher
from ..keys.model import REVOKED, SUSPENDED, KeyRecord
from ..keys.store import KeyStore
from ..pipeline.results import Principal

log = logging.getLogger("tokenward.identity")

INVALID = Refusal(Reason.invalid_credentials, "invalid API key")
EXPIRED = Refusal(Reason.credentials_expired, "API key has expired")
REVOKED_KEY = Refusal(Reason.key_revoked, "API key has been revoked")
WRONG_ENVIRONMENT = Refusal(Reason.key_scope_denied, "API key is not valid in this environment")
STORE_DOWN = Refusal(Reason.keystore_unavailable, "key store unavailable; try again shortly",
                     headers=((b"retry-after", b"1"),))
NO_TENANT = Refusal(Reason.invalid_credentials, "API key belongs to no configured tenant")


class KeyEntry:
    __slots__ = ("hash", "principal", "revoked", "suspended_until", "expires_at", "env_ok")

    def __init__(self, record: KeyRecord, principal: Principal | None, env_ok: bool) -> None:
        self.hash = bytes.fromhex(record.secret_hash)
        self.principal = principal
        self.revoked = record.status == REVOKED
        # A suspension without an end stays until reinstated.
        self.suspended_until = (record.suspended_until if record.suspended_until is not None else math.inf) \
            if record.status == SUSPENDED else None
        self.expires_at = record.expires_at
        self.env_ok = env_ok


class ApiKeyAuthenticator:
    def __init__(self, store: KeyStore, plans: dict[str, tuple[str, PlanConfig]], ttl_s: float,
                 environment: str | None, batcher: LastUsedBatcher | None,
                 clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._plans = plans
        self._environment = environment
        self._batcher = batcher
        self._clock = clock
        self.cache: KeyCache[KeyEntry] = KeyCache(self._load, ttl_s)

    async def _load(self, key_id: str) -> KeyEntry | None:
        record = await self._store.get(key_id)
        if record is None:
            return None
        plan = self._plans.get(record.tenant)
        principal = None
        if plan is not None:
            scopes = frozenset(record.models) if record.models is not None else None
            principal = Principal(tenant=record.tenant, key_id=record.id, plan_name=plan[0], plan=plan[1],
                                  scopes=scopes, kind="api_key", limits=record.limits())
        env_ok = record.environments is None or self._environment in record.environments
        return KeyEntry(record, principal, env_ok)

    def cached(self, credential: str) -> Principal | Refusal | None:
        """``authenticate``'s answer when the key's entry is in the cache (or the credential
        is no key of ours); None when the key store must be read first."""
        parsed = keyformat.parse_key(credential)
        if parsed is None:
            return INVALID
        entry = self.cache.fresh(parsed.key_id)
        if entry is MISS:
            return None
        return self._verify(parsed, entry)

    async def authenticate(self, credential: str) -> Principal | Refusal:
        parsed = keyformat.parse_key(credential)
        if parsed is None:
            return INVALID
        entry = self.cache.fresh(parsed.key_id)
        if entry is MISS:
            try:
                entry = await self.cache.load(parsed.key_id)
            except Exception:  # noqa: BLE001 - any store failure: refuse cleanly, never a 500
                log.warning("key store lookup failed", exc_info=True)
                return STORE_DOWN
        return self._verify(parsed, entry)

    def _verify(self, parsed: keyformat.ParsedKey, entry: KeyEntry | None) -> Principal | Refusal:
        if entry is None or not keyformat.matches(parsed, entry.hash):
            return INVALID
        # Only the holder of the right secret learns the key's state.
        now = self._clock()
        if entry.revoked:
            return REVOKED_KEY
        if entry.suspended_until is not None and entry.suspended_until > now:
            return _suspended(entry.suspended_until - now)
        if entry.expires_at is not None and entry.expires_at <= now:
            return EXPIRED
        if not entry.env_ok:
            return WRONG_ENVIRONMENT
        if entry.principal is None:
            return NO_TENANT
        if self._batcher is not None:
            self._batcher.touch(parsed.key_id, now)
        return entry.principal


def _suspended(left_s: float) -> Refusal:
    if left_s == math.inf:
        return Refusal(Reason.key_suspended, "API key is suspended until reinstated")
    seconds = max(1, math.ceil(left_s))
    return Refusal(Reason.key_suspended, f"API key is suspended for another {seconds}s",
                   headers=((b"retry-after", str(seconds).encode()),))
