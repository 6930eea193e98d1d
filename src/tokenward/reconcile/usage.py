"""Token usage, keeping unknown apart from zero.

``source`` says where a count came from: ``reported`` by the backend, ``counted`` by the
gateway from what it streamed (an estimate), or ``unknown`` (nothing trustworthy: the
reservation is then charged in full, never refunded as if zero were used).
"""

from __future__ import annotations

from typing import Literal

import msgspec

UsageSource = Literal["reported", "counted", "unknown"]


class Usage(msgspec.Struct, frozen=True, omit_defaults=True):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    source: UsageSource = "unknown"

    @property
    def known(self) -> bool:
        return self.source != "unknown" and self.completion_tokens is not None

    @property
    def total_tokens(self) -> int | None:
        if self.prompt_tokens is None or self.completion_tokens is None:
            return None
        return self.prompt_tokens + self.completion_tokens


UNKNOWN = Usage()


class _Reported(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


def from_reported(raw: object) -> Usage:
    """Usage from a backend's ``usage`` object (already decoded); UNKNOWN if unusable."""
    if not isinstance(raw, dict):
        return UNKNOWN
    prompt = raw.get("prompt_tokens")
    completion = raw.get("completion_tokens")
    if not isinstance(prompt, int) or isinstance(prompt, bool):
        prompt = None
    if not isinstance(completion, int) or isinstance(completion, bool):
        # embeddings report prompt tokens only
        completion = 0 if prompt is not None and "completion_tokens" not in raw else None
    if prompt is None and completion is None:
        return UNKNOWN
    return Usage(prompt, completion, "reported")
