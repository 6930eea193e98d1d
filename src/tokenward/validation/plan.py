"""What a refusal of a plan's feature says: the setting that enables it."""

from __future__ import annotations

def feature_hint(feature: str, also: str | None = None) -> str:
    """What a ``feature_not_entitled`` refusal adds: the plan setting that enables it, so
    the caller can tell the operator what to change."""
    alternative = f" (or `{also}`)" if also else ""
    return f"; the plan's `features` list enables it with `{feature}`{alternative}"
