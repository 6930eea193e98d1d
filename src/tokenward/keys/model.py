"""What the key store holds: keys (never their secrets) and the audit trail of changes."""

from __future__ import annotations

from typing import Any

import re

import msgspec

from ..config.key_limits import KeyLimits
from ..errors import TokenwardError

ACTIVE, SUSPENDED, REVOKED = "active", "suspended", "revoked"
EXPIRED = "expired"  # derived from expires_at, never stored


class KeyRecord(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    tenant: str
    name: str | None = None
    # Models this key may use; None = every model of the tenant's plan.
    models: tuple[str, ...] | None = None
    # Deployment environments this key is valid in; None = any.
    environments: tuple[str, ...] | None = None
    status: str = ACTIVE
    suspended_until: float | None = None
    expires_at: float | None = None
    created_at: float = 0.0
    last_used_at: float | None = None
    secret_hash: str = ""
    # the key's own limits, below its plan's (None: the plan's alone)
    daily_spend_usd: float | None = None
    monthly_spend_usd: float | None = None
    tokens_per_minute: int | None = None

    def limits(self) -> KeyLimits | None:
        if self.daily_spend_usd is None and self.monthly_spend_usd is None and self.tokens_per_minute is None:
            return None
        return KeyLimits(daily_spend_usd=self.daily_spend_usd, monthly_spend_usd=self.monthly_spend_usd,
                         tokens_per_minute=self.tokens_per_minute)

    def state_at(self, now: float) -> str:
        """active | suspended | revoked | expired, as seen at ``now`` (unix seconds)."""
        if self.status == REVOKED:
            return REVOKED
        if self.status == SUSPENDED and (self.suspended_until is None or self.suspended_until > now):
            return SUSPENDED
        if self.expires_at is not None and self.expires_at <= now:
            return EXPIRED
        return ACTIVE

    def public(self, now: float) -> dict[str, Any]:
        """The record as shown to an operator: no hash, and the state as of now."""
        out = msgspec.structs.asdict(self)
        del out["secret_hash"]
        out["state"] = self.state_at(now)
        return out


class AuditRecord(msgspec.Struct, frozen=True, kw_only=True):
    id: int
    key_id: str
    tenant: str
    action: str                 # create | revoke | suspend | reinstate
    reason: str | None = None
    scope: str = ""             # what the action applies to, e.g. "key:<id>"
    duration_s: float | None = None
    reviewer: str | None = None
    at: float = 0.0
    detail: dict[str, Any] | None = None


class KeyStoreError(TokenwardError):
    """A key lifecycle operation that cannot be done; ``str()`` says why, for an operator."""


class KeyNotFound(KeyStoreError):
    def __init__(self, key_id: str) -> None:
        super().__init__(f"no key with id {key_id}")
        self.key_id = key_id


class KeyStateError(KeyStoreError):
    pass


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    """``90s``, ``15m``, ``1h``, ``30d``, ``2w`` (a bare number is seconds) -> seconds."""
    match = _DURATION.match(text.lower())
    if match is None or float(match.group(1)) <= 0:
        raise ValueError(f"invalid duration {text!r}: expected a positive number with s, m, h, d or w")
    return float(match.group(1)) * _UNIT_S[match.group(2)]
