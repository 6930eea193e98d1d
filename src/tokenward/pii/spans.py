"""What every PII candidate finder shares: the span type and a cheap digit test.

The finders (``digit_scan``, ``keyworded``, ``email_ipv6``) and the detector that
settles their overlaps (``patterns``) all trade ``(start, end, ENTITY)`` tuples, so the
type lives here, below all of them, rather than in any one of them.
"""

from __future__ import annotations

__all__ = ["DIGIT_CHARS", "Span", "contains_digit"]

Span = tuple[int, int, str]

DIGIT_CHARS = "0123456789"


def contains_digit(text: str) -> bool:
    """Digit presence with ten memchr scans: cheaper than one regex pass over the text."""
    for d in DIGIT_CHARS:
        if d in text:
            return True
    return False
