"""The typed values stages leave on the request context, one per stage that decides.

Frozen, so a later stage can read but never alter what an earlier one decided.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

import msgspec
from msgspec import UNSET, UnsetType

from ..config.key_limits import KeyLimits
from ..config.schema import PlanConfig
from ..pii.spans import Span as Found
from ..validation.texts import Span, TextUnit, texts_of


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

    def with_max_output(self, cap: int) -> Entitlement:
        """The same entitlement with the output bound lowered to ``cap`` (an operator's or
        an abuse action's restriction: the control stage)."""
        return msgspec.structs.replace(self, plan=msgspec.structs.replace(self.plan, max_output_tokens=cap))


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


class BudgetRecord(msgspec.Struct, kw_only=True):
    """Admission's account of one request: what it estimated and reserved, against which
    limits, and, once settled, what was charged (the decision record's ``notes.budget``;
    outside checks read ``actual``). Written by the admission stage only; fields not known
    yet are left out of the record."""

    estimated_input: int
    reserved: int
    reserved_cost: int
    limits: tuple[str, ...]
    store: str
    shadow_would_reject: Any = UNSET
    stateful_prompt: int | UnsetType = UNSET   # a stateful request's prompt, reserved at the context limit
    refused_by: str | UnsetType = UNSET
    job: str | UnsetType = UNSET
    actual: int | None | UnsetType = UNSET     # None: charged in full, the usage being unknown
    refunded: int | UnsetType = UNSET
    settle: str | UnsetType = UNSET


class Reservation(msgspec.Struct, frozen=True):
    """What the admission stage took, to give back or settle exactly once."""

    reservation_id: str
    tenant: str
    tokens: int
    cost_units: int = 0
    stream_slot: bool = False
    limits: tuple[str, ...] = ()
    record: BudgetRecord | None = None


class Screening:
    """The screening stage's result (``ctx.screening``): what the transform stage acts on
    (restrict, the spans to mask, the output finder), and the record (scores, counts)."""

    __slots__ = ("record", "restrict", "units", "texts", "pii_spans", "pii_mode", "pii_detector", "output_find")

    def __init__(self, units: list[TextUnit]) -> None:
        self.record: dict[str, Any] = {}
        self.restrict = False
        self.units = units              # where each text sits, for masking (validation/texts.py)
        self.texts = texts_of(units)    # what the screeners read: units[i].text
        self.pii_spans: list[Span] | None = None   # to mask (redact / tokenize)
        self.pii_mode: str | None = None
        self.pii_detector: str | None = None
        # the answer's own personal data is redacted with this: text -> [(start, end, ENTITY)]
        self.output_find: Callable[[str], list[Found]] | None = None

    @property
    def rewrites(self) -> bool:
        return self.restrict or self.pii_spans is not None


class JobTicket(Protocol):
    """A request's place in an agent job (jobs/runs.py ``JobRun``): the forward step asks
    it right before dispatch, and it refuses if the job can take no more work."""

    async def dispatch(self) -> None: ...
