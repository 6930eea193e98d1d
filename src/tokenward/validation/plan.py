"""Which plan governs a request: the entitlement's, else the principal's, else defaults."""

from __future__ import annotations

from typing import Any

from ..config.schema import PlanConfig

DEFAULT_PLAN = PlanConfig()
_features_cache: dict[tuple[str, ...], frozenset[str]] = {}


def plan_of(ctx: Any) -> PlanConfig:
    plan = getattr(ctx.entitlement, "plan", None)
    if plan is None:
        plan = getattr(ctx.principal, "plan", None)
    return plan if plan is not None else DEFAULT_PLAN


def features_of(ctx: Any, plan: PlanConfig) -> frozenset[str]:
    """The enabled features: the entitlement's set when it decided one, else the plan's."""
    decided: frozenset[str] | None = getattr(ctx.entitlement, "features", None)
    if decided:
        return decided
    features = _features_cache.get(plan.features)
    if features is None:
        features = frozenset(plan.features)
        if len(_features_cache) < 1024:
            _features_cache[plan.features] = features
    return features


def feature_hint(feature: str, also: str | None = None) -> str:
    """What a ``feature_not_entitled`` refusal adds: the plan setting that enables it, so
    the caller can tell the operator what to change."""
    alternative = f" (or `{also}`)" if also else ""
    return f"; the plan's `features` list enables it with `{feature}`{alternative}"
