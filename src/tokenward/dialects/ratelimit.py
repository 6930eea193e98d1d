"""Rate-limit headers in each dialect's convention, as pure functions.

The budget code already writes OpenAI's headers (``x-ratelimit-limit-tokens``,
``x-ratelimit-remaining-requests``, ``x-ratelimit-reset-tokens: 6m0s``, ...): they are
what ``/v1/responses`` sends, unchanged. ``/v1/messages`` sends Anthropic's instead:
``anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}``, the reset an RFC 3339
time (when the bucket is full again), and ``retry-after`` in whole seconds, which both
SDKs honour. ``anthropic_from_openai`` rewrites one into the other.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from functools import lru_cache

Headers = list[tuple[bytes, bytes]]
_PREFIX = b"x-ratelimit-"
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+)ms)?$")


@lru_cache(maxsize=4096)   # resets repeat: a few hundred distinct texts a minute
def duration_ms(text: str) -> int | None:
    """OpenAI's reset text (``20ms``, ``1s``, ``6m0s``, ``1h2m3s``) in milliseconds."""
    match = _DURATION.match(text.strip())
    if not match or not any(match.groups()):
        return None
    hours, minutes, seconds, millis = match.groups()
    total = int(hours or 0) * 3_600_000 + int(minutes or 0) * 60_000 + int(millis or 0)
    return total + round(float(seconds or 0) * 1000)


def format_duration(ms: int) -> str:
    """Milliseconds as OpenAI's reset text (as ``budget.policy.format_reset`` writes it)."""
    if ms < 1000:
        return f"{max(ms, 0)}ms"
    seconds = -(-ms // 1000)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


def rfc3339(now: float, after_ms: int) -> str:
    """The UTC time ``after_ms`` after ``now`` (seconds since the epoch), to the second,
    rounded up so a client waiting until then finds the bucket full."""
    return _second(-(-(int(now * 1000) + max(after_ms, 0)) // 1000))


@lru_cache(maxsize=1024)
def _second(at: int) -> str:
    return datetime.fromtimestamp(at, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def anthropic_from_openai(headers: Headers, now: float) -> Headers:
    """The same headers with every ``x-ratelimit-*`` rewritten in Anthropic's convention.

    ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` become
    ``anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}``; any other header
    (``retry-after``, ``x-should-retry``, ``x-request-id``, ...) is kept as it is. A reset
    that does not parse is dropped rather than sent in the wrong format.
    """
    out: Headers = []
    for name, value in headers:
        lower = name.lower()
        if not lower.startswith(_PREFIX):
            out.append((name, value))
            continue
        part, _, what = lower[len(_PREFIX):].partition(b"-")
        if part not in (b"limit", b"remaining", b"reset") or what not in (b"requests", b"tokens"):
            continue
        if part == b"reset":
            ms = duration_ms(value.decode("latin-1"))
            if ms is None:
                continue
            value = rfc3339(now, ms).encode()
        out.append((b"anthropic-ratelimit-" + what + b"-" + part, value))
    return out


def retry_after(ms: int) -> tuple[bytes, bytes]:
    """``retry-after`` in whole seconds, rounded up (both SDKs read it; 0 never sent)."""
    return (b"retry-after", b"%d" % max(1, -(-ms // 1000)))
