"""The typed values stages leave on the request context, one per stage that decides.

Frozen, so a later stage can read but never alter what an earlier one decided.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..config.key_limits import KeyLimits
from ..config.schema import PlanConfig


class Principal(msgspec.Struct, frozen=True):
    """Who the caller is, from a verified credential only (identity stage)."""

    tenant: str
    key_id: str                       # API key id, or "jwt:<issuer>:<subject>"
    plan_name: str
    plan: PlanConfig                  # the tenant's plan with its overrides applied
    scopes: frozenset[str] | None = None   # models the credential may use; None = the plan's
    kind: str = "api_key"             # "api_key" | "jwt"
    end_user: str | None = None       # the request's ``user`` label, inside the verified tenant
    limits: KeyLimits | None = None   # the API key's own limits, below the plan's (keys create)


class Entitlement(msgspec.Struct, frozen=True):
    """What this caller may set on this request (entitlement stage)."""

    models: frozenset[str]            # models the caller may use (plan ∩ key scope)
    plan: PlanConfig
    system_prompt: str | None = None  # server-side prompt that replaces the caller's, if any
    features: frozenset[str] = frozenset()


class Work(msgspec.Struct, frozen=True):
    """What the request may cost at worst (work stage): the admission stage reserves this."""

    input_tokens: int                 # counted (or bounded) prompt tokens, all items
    max_output_tokens: int            # clamped max_tokens per choice
    outer_items: int = 1
    candidates: int = 1               # max(n, best_of)
    surcharge: int = 0
    reserve_tokens: int = 0           # the worst case: items x candidates x (input + output) + surcharge
    tokenizer: str = "estimate"
    detail: dict[str, Any] | None = None
    stateful: bool = False            # the prompt side is the context limit (pipeline/route.py)


class Reservation(msgspec.Struct, frozen=True):
    """What the admission stage took, to give back or settle exactly once."""

    reservation_id: str
    tenant: str
    tokens: int
    cost_units: int = 0
    stream_slot: bool = False
    limits: tuple[str, ...] = ()
