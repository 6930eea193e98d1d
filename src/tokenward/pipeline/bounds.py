"""What one request could have used, from what the work stage (or admission) computed:
the bound a backend's usage report is clamped to, and the size its answer may have.

- **Usage.** ``usage_bounds``: what a backend's usage report is clamped to
  (``usage_bounds.clamp``) before anything reads it; upstream/usage_report.py applies it, records
  and counts what was cut.
- **Answer size.** ``answer_limit``: a whole body or a stream may carry
  ``bytes_per_token`` x the output bound x choices, + ``slack`` bytes; a request whose
  answer repeats its prompt (``echo``, ``prompt_logprobs``) adds the prompt's bound
  times ``bytes_per_token``, an embedding answer ``EMBEDDING_BYTES`` per input item.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..reconcile.usage_bounds import UsageBounds

if TYPE_CHECKING:
    from .context import RequestContext

NO_BOUNDS = UsageBounds(None, None)
# One embedding vector as JSON text: 8,192 dimensions x 25 bytes ("-1.2345678901234567e-05,")
# is 200 KiB; the largest common models have 3,072 dimensions.
EMBEDDING_BYTES = 256 * 1024


# tuple.__new__ builds the named tuple in C: UsageBounds(...) runs a Python-level __new__
# (a third of this function's time, per request)
_pair = tuple.__new__


def usage_bounds(ctx: RequestContext) -> UsageBounds:
    """The request's bounds: the work stage's (prompt: every candidate's prompt plus the
    surcharges; completion: max tokens x choices x outer items), else the reservation's
    split (prompt bytes, the rest), else none."""
    work = ctx.work
    if work is not None:
        completion = work.max_output_tokens * work.candidates * work.outer_items
        prompt = work.reserve_tokens - completion
        return _pair(UsageBounds, (prompt if prompt > 0 else 0, completion))
    reservation = ctx.reservation
    if reservation is None:
        return NO_BOUNDS
    record = reservation.record
    if record is None:
        return UsageBounds(reservation.tokens, reservation.tokens)
    estimated = record.estimated_input
    return UsageBounds(estimated, max(reservation.tokens - estimated, 0))


def answer_limit(ctx: RequestContext, bytes_per_token: int, slack: int) -> int | None:
    """The most bytes the backend's answer to this request may carry (None: no bound)."""
    work = ctx.work
    limit: int
    if work is not None:
        completion = work.max_output_tokens * work.candidates * work.outer_items
        limit = bytes_per_token * completion + slack
        if completion == 0:
            limit += EMBEDDING_BYTES * work.outer_items   # an embedding answer is its vectors
    else:
        bound_prompt, bound_completion = usage_bounds(ctx)
        if bound_prompt is None or bound_completion is None:
            return None
        limit = bytes_per_token * bound_completion + slack
    request = ctx.request
    if request is not None and request.echoes_prompt:
        limit += bytes_per_token * (usage_bounds(ctx)[0] or 0)   # (set whenever a limit is)
    return limit
