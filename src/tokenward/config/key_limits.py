"""A key's own limits, below its plan's: set when the key is created (``tokenward keys create
--daily-spend-usd X --monthly-spend-usd X --tokens-per-minute N``, or the admin API's
``daily_spend_usd``, ``monthly_spend_usd``, ``tokens_per_minute``), kept with the key, and
reserved against in the same atomic step as the plan's limits (budget/limits.py)."""

from __future__ import annotations

import math

import msgspec

from .schema import PlanConfig

# (name, the plan field it must stay below, number type)
FIELDS = (("daily_spend_usd", "daily_spend_usd", float),
          ("monthly_spend_usd", "monthly_spend_usd", float),
          ("tokens_per_minute", "tokens_per_minute", int))


class KeyLimits(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """None: no limit of the key's own for that one (the plan's still applies)."""

    daily_spend_usd: float | None = None
    monthly_spend_usd: float | None = None
    tokens_per_minute: int | None = None

    def any(self) -> bool:
        return any(getattr(self, name) is not None for name, _, _ in FIELDS)


def key_limits(values: dict[str, object]) -> KeyLimits | None:
    """A ``KeyLimits`` from given values (None where not given), or None when none is given.
    Raises ``ValueError`` naming the field for a value that is not a positive number."""
    checked: dict[str, float | int] = {}
    for name, _, kind in FIELDS:
        value = values.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{name} must be a positive number, got {value!r}")
        if kind is int and value != int(value):
            raise ValueError(f"{name} must be a whole number of tokens, got {value!r}")
        checked[name] = kind(value)
    return KeyLimits(**checked) if checked else None   # type: ignore[arg-type]  # names are FIELDS'


def above_plan(limits: KeyLimits, plan: PlanConfig) -> list[str]:
    """The key limits that would not be below the plan's (a plan without that limit, or with
    0 meaning none for tokens_per_minute, bounds nothing: any key limit is below it)."""
    out = []
    for name, plan_field, _ in FIELDS:
        value = getattr(limits, name)
        bound = getattr(plan, plan_field)
        if value is not None and bound is not None and bound > 0 and value > bound:
            out.append(f"{name} {value:g} is above the plan's {bound:g}")
    return out
