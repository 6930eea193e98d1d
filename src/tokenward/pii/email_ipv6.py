"""The two PII entities found from punctuation rather than digits: e-mails and IPv6.

Every other entity has a digit at a known place and is tried at digit runs
(``digit_scan``). An e-mail address may hold no digit and an IPv6 address may start
with a hex letter, so they are found from their ``@`` and ``:`` with ``str.find`` --
text without either costs one ``in`` scan each -- and matched anchored from there.
"""

from __future__ import annotations

import ipaddress
import re
from string import ascii_letters, digits

from .spans import DIGIT_CHARS, Span

__all__ = ["scan_emails", "scan_ipv6"]

_HEX = frozenset("0123456789abcdefABCDEF")
_LOCAL_CHARS = frozenset(ascii_letters + digits + "._%+-")

_DOMAIN = re.compile(
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}(?![A-Za-z0-9_-])", re.ASCII
)

# Hex groups and colons (at most 8x4 + 7), an optional dotted IPv4 tail, an optional zone.
_IPV6 = re.compile(
    r"(?<![\w:.])[0-9A-Fa-f:]{2,39}+(?:\.[0-9]{1,3}){0,3}+(?:%[0-9A-Za-z]{1,15})?(?![\w:])",
    re.ASCII,
)


def scan_emails(text: str, out: list[Span]) -> None:
    """Each '@': the local part walked back (at most 64 chars), the domain matched forward."""
    at = text.find("@")
    while at != -1:
        start = at
        limit = max(0, at - 64)
        while start > limit and text[start - 1] in _LOCAL_CHARS:
            start -= 1
        while start < at and text[start] == ".":
            start += 1
        dots = text.rfind("..", start, at)
        if dots != -1:
            start = dots + 2
        nxt = at + 1
        if start < at and text[at - 1] != ".":
            m = _DOMAIN.match(text, at + 1)
            if m is not None and m.end() - at - 1 <= 253:
                out.append((start, m.end(), "EMAIL"))
                nxt = m.end()
        at = text.find("@", nxt)


def _ipv6_at(text: str, colon: int) -> tuple[Span | None, int]:
    """An IPv6 candidate around the colon at ``colon``: (span or None, where to look next)."""
    start = colon
    while start > 0 and colon - start < 4 and text[start - 1] in _HEX:
        start -= 1
    m = _IPV6.match(text, start)
    if m is None:
        return None, colon + 1
    cand = m.group()
    address = cand.split("%", 1)[0]
    if address.count(":") >= 2 and any(c in DIGIT_CHARS for c in address):
        for trial in (cand, cand[:-1] if cand.endswith(":") and not cand.endswith("::") else None):
            if trial is None:
                continue
            try:
                ipaddress.IPv6Address(trial)
            except ValueError:
                continue
            return (m.start(), m.start() + len(trial), "IP_ADDRESS"), m.end()
    return None, m.end()


def scan_ipv6(text: str, out: list[Span]) -> None:
    """Candidates are tried around colons that have another colon close after them."""
    pos = text.find(":")
    while pos != -1:
        # Groups are at most 4 hex digits, so an address's first colon has another within 5.
        if text.find(":", pos + 1, pos + 6) == -1:
            pos = text.find(":", pos + 1)
            continue
        span, nxt = _ipv6_at(text, pos)
        if span is not None:
            out.append(span)
        pos = text.find(":", max(nxt, pos + 1))
