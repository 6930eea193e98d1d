"""The built-in PII detector: compiled patterns find candidates, Python validates them.

Shapes alone are a poor detector -- ordinary text is full of dates, order numbers,
versions, hashes and prices -- so every candidate that carries redundancy is checked
(Luhn and the issuer ranges for cards, ISO 13616 mod-97 and the country's length for
IBANs, the ABA 3-7-1 checksum, SSA rules for SSNs, NANP rules for phones, the
double-SHA256 or bech32 checksum for Bitcoin addresses, ``ipaddress`` for IPs). The
identifiers without a checksum (bank account numbers, bare routing/SSN/phone digit
runs) are only reported next to a keyword that says what they are.

Speed comes from not scanning the text once per entity: a regex pass over 2 KB costs
~10 microseconds in CPython's ``re`` whatever the pattern. One pass finds the digit runs
whose neighbourhood fits some entity, and each entity's pattern is then tried
*anchored* at those runs only (``digit_scan``, shapes in ``digit_shapes``, keyworded
runs in ``keyworded``); e-mail and IPv6 are found from their ``@`` and ``:`` with
``str.find`` (``email_ipv6``). Text with no digit, ``@`` or ``:`` costs ten ``in`` scans.

This module holds what the finders feed: the entity list, the detector, and the
resolution of overlapping candidates. Overlaps are settled by length, then by how much
the validation proves (a checksum beats a shape, a shape beats a keyword).

Spans are built only from explicit ASCII classes and a literal space (never ``\\s``),
so none contains a quote, a backslash or a control character; a final check drops any
that would, since callers splice spans into JSON.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .digit_scan import DigitScan, trigger_runs
from .digit_scan import all_runs as _all_runs  # noqa: F401  (tests swap it in for the trigger)
from .email_ipv6 import scan_emails, scan_ipv6
from .spans import Span, contains_digit, keep_apart

__all__ = ["ENTITIES", "PatternDetector", "Span"]

ENTITIES: tuple[str, ...] = (
    "EMAIL",
    "PHONE",
    "CREDIT_CARD",
    "US_SSN",
    "IBAN",
    "IP_ADDRESS",
    "BANK_ACCOUNT",
    "ROUTING_NUMBER",
    "STREET_ADDRESS",
    "CRYPTO",
)

def choose_entities(entities: Iterable[str] | None, known: tuple[str, ...]) -> frozenset[str]:
    """The entity types a detector is asked for (None: all it knows); an unknown one is a
    ValueError naming it and the known ones."""
    if entities is None:
        return frozenset(known)
    chosen = frozenset(entities)
    unknown = sorted(chosen - set(known))
    if unknown:
        raise ValueError(f"unknown PII entity {', '.join(unknown)}; known: {', '.join(known)}")
    return chosen


# When two candidates of equal length overlap, the one whose validation says more wins:
# a checksum beats a shape, a shape beats a keyword.
_RANK = {
    "CRYPTO": 0,
    "IBAN": 1,
    "CREDIT_CARD": 2,
    "ROUTING_NUMBER": 3,
    "US_SSN": 4,
    "EMAIL": 5,
    "IP_ADDRESS": 6,
    "PHONE": 7,
    "STREET_ADDRESS": 8,
    "BANK_ACCOUNT": 9,
}

_UNSAFE = re.compile(r'["\\\x00-\x1f\x7f-\x9f]')


def _resolve(cands: list[Span]) -> list[Span]:
    """Non-overlapping spans sorted by start: longer first, then the more specific entity."""
    if len(cands) <= 1:
        return cands
    cands.sort(key=lambda c: (c[0] - c[1], _RANK[c[2]], c[0]))
    return keep_apart([], cands)


class PatternDetector:
    """Finds ENTITIES by validated patterns; no model, no network, stdlib only."""

    name = "patterns"
    # Where digit-bearing candidates are tried. Tests swap in _all_runs to show that the
    # trigger is only an optimisation: it never drops a span the full scan would find.
    _runs = staticmethod(trigger_runs)

    def __init__(self, entities: Iterable[str] | None = None, regions: Iterable[str] | None = None) -> None:
        chosen = self.entities = choose_entities(entities, ENTITIES)
        # phones and streets of the named regions (pii/regional.py; needs phonenumbers)
        self._regional = None
        if regions:
            from .regional import RegionalFinder

            self._regional = RegionalFinder(regions, chosen)
        digit_entities = chosen - {"EMAIL"}
        self._digits = DigitScan(digit_entities) if digit_entities else None
        self._email = "EMAIL" in chosen
        self._ip = "IP_ADDRESS" in chosen

    def find(self, text: str) -> list[Span]:
        """(start, end, ENTITY) spans into ``text``, sorted by start and non-overlapping."""
        out: list[Span] = []
        if self._email and "@" in text:
            scan_emails(text, out)
        if self._ip and ":" in text:
            scan_ipv6(text, out)
        digits = self._digits is not None and contains_digit(text)
        if digits:
            self._digits.scan(text, out, self._runs(text))  # type: ignore[union-attr]
        if self._regional is not None:
            out += self._regional.find(text, digits, out)
        if not out:
            return out
        return [span for span in _resolve(out) if _UNSAFE.search(text, span[0], span[1]) is None]
