"""Token usage, keeping unknown apart from zero.

``source`` says where a count came from: ``reported`` by the backend, ``counted`` by the
gateway from what it streamed (an estimate), or ``unknown`` (nothing trustworthy: the
reservation is then charged in full, never refunded as if zero were used). What reads a
backend's report and holds it to the request's bounds is in ``usage_bounds.py``, compiled
where the install is (a module holding a Struct cannot be: tokenward/compiled.py).
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
# What a request that reached no backend used: counted, and nothing (refused in the forward
# step before dispatch, answered by a stage, a cache hit).
NOTHING_USED = Usage(0, 0, "counted")


class _Reported(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class _UsageMember(msgspec.Struct):
    usage: object = None


# A whole answer's top-level ``usage`` member, the rest skipped (``.usage``: None without one)
decode_usage_member = msgspec.json.Decoder(_UsageMember).decode
