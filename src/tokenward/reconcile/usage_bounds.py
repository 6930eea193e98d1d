"""A backend's usage report read, and held to what the request could have used.

Per request: a whole answer's report is read (``from_reported``) and clamped (``clamp``);
kept apart from ``usage.py``'s Struct so that this module can be compiled.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from .usage import UNKNOWN, Usage

_UNKNOWN: Final = UNKNOWN


def from_reported(raw: object) -> Usage:
    """Usage from a backend's ``usage`` object (already decoded); UNKNOWN if unusable."""
    if not isinstance(raw, dict):
        return _UNKNOWN
    prompt = raw.get("prompt_tokens")
    completion = raw.get("completion_tokens")
    if not isinstance(prompt, int) or isinstance(prompt, bool):
        prompt = None
    if not isinstance(completion, int) or isinstance(completion, bool):
        # embeddings report prompt tokens only
        completion = 0 if prompt is not None and "completion_tokens" not in raw else None
    if prompt is None and completion is None:
        return _UNKNOWN
    return Usage(prompt, completion, "reported")


class UsageBounds(NamedTuple):
    """The most a request can have used, per dimension (``None``: no bound known).

    ``prompt``: the counted prompt's bound (every candidate's prompt and the surcharges the
    work stage added); ``completion``: the output bound x choices (x outer items for a
    completions prompt list). Together they are the request's reservation.
    """

    prompt: int | None
    completion: int | None


def clamp(usage: Usage, bounds: UsageBounds) -> tuple[Usage, dict[str, dict[str, int]] | None]:
    """``usage`` with each count within ``[0, bound]``, and what was out of bounds (None:
    nothing). A backend's report is a claim, not a fact: a negative count would refund
    more than was reserved, a huge one charge a tenant for work it could not have asked for."""
    prompt, completion = usage.prompt_tokens, usage.completion_tokens
    most_p, most_c = bounds
    # the common case first: every count known is in bounds
    if (prompt is None or 0 <= prompt and (most_p is None or prompt <= most_p)) and \
            (completion is None or 0 <= completion and (most_c is None or completion <= most_c)):
        return usage, None
    out: dict[str, dict[str, int]] = {}
    prompt = _within(prompt, most_p, "prompt_tokens", out)
    completion = _within(completion, most_c, "completion_tokens", out)
    return Usage(prompt, completion, usage.source), out


def _within(value: int | None, bound: int | None, name: str, out: dict[str, dict[str, int]]) -> int | None:
    if value is None:
        return None
    kept = 0 if value < 0 else bound if bound is not None and value > bound else value
    if kept != value:
        out[name] = {"reported": value, "used": kept} if bound is None else \
            {"reported": value, "bound": bound, "used": kept}
    return kept
