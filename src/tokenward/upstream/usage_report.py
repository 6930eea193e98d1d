"""A backend's usage report, held to what the request could have used.

``bounded`` clamps the report (reconcile/usage.py ``clamp``) to the request's bounds
(pipeline/bounds.py) before anything reads it: settle, metrics, the decision record, the
usage chunk the gateway writes. What was out of bounds is recorded on the request
(``notes.usage_out_of_bounds``) and counted by upstream and dimension
(``tokenward_usage_out_of_bounds_total``), so a lying or buggy backend shows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..pipeline.bounds import usage_bounds
from ..reconcile.usage import Usage
from ..reconcile.usage_bounds import clamp

if TYPE_CHECKING:
    from ..pipeline.context import RequestContext
    from .targets import Target


def bounded(ctx: RequestContext, target: Target, usage: Usage) -> Usage:
    """``usage`` clamped to the request's bounds; what was cut is recorded and counted
    against ``target``'s upstream."""
    if usage.prompt_tokens is None and usage.completion_tokens is None:
        return usage
    kept, cut = clamp(usage, usage_bounds(ctx))
    if cut is not None:
        ctx.note("usage_out_of_bounds", cut)
        for dimension in cut:
            target.metrics.usage_out_of_bounds(target.upstream_name, dimension)
    return kept
