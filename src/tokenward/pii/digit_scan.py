"""Digit-bearing PII candidates: each entity's shape tried at the digit runs where it could start.

Every entity but e-mail and IPv6 (``email_ipv6``) has a digit at a known place. Rather
than scan the text once per entity, one regex pass (``digit_shapes.TRIGGER``) finds the
digit runs whose neighbourhood fits some entity, and the characters just before and
after each run decide which shapes (``digit_shapes``) are tried there, anchored, so no
match rescans the text. The trigger is only an optimisation: tests run the same code at
every digit run (``all_runs``) and compare.

A candidate that carries redundancy is validated here (``checksums``): Luhn and the
issuer ranges for cards, ISO 13616 mod-97 and the country's length for IBANs, SSA rules
for SSNs, NANP rules for phones, the double-SHA256 or bech32 checksum for Bitcoin
addresses, ``ipaddress`` for IPv4. Digit runs inside a checksum-validated span (an
IBAN, a card, a Bitcoin address) are not tried again: anything starting there would
overlap an identifier already proven by its checksum. Standalone 6-17 digit runs are
handed to ``keyworded``, which reports them only next to a keyword.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Iterator
from string import ascii_letters, ascii_uppercase, digits

from .checksums import (
    IBAN_LENGTHS,
    bitcoin_base58_valid,
    card_brand_plausible,
    iban_valid,
    luhn_valid,
    nanp_valid,
    segwit_address_valid,
    ssn_valid,
)
from .digit_shapes import (
    ALL_RUNS,
    BASE58,
    BECH32,
    CARD,
    IBAN,
    INTL_PHONE,
    INTL_TOKEN,
    IPV4,
    NANP,
    SEP,
    SSN,
    STREET,
    TRIGGER,
)
from .identifier_words import after_identifier_word
from .keyworded import KEYED_ENTITIES, classify_runs
from .phones import in_version_context, national_phone, with_extension
from .spans import DIGIT_CHARS, Span

__all__ = ["DigitScan", "all_runs", "trigger_runs"]

_WORD_CHARS = frozenset(ascii_letters + digits + "_")
_UPPER = frozenset(ascii_uppercase)


# How far past a digit the trigger's lookaheads read (a base58 address's 25 characters after
# its leading "1" or "3" is the longest); the scan ends this far past the last digit.
_TRIGGER_REACH = 64


def trigger_runs(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of the digit runs where some digit-bearing entity could start. The regex
    scans only from the first digit to just past the last (found by memchr, ``str.find``):
    a prompt whose numbers sit in one place is not read through at ~5 ns a character. (On a
    short text the twenty look-ups cost more than they save.)"""
    if len(text) < 512:
        for run in TRIGGER.finditer(text):
            yield run.start(), run.end(1)
        return
    first, last = len(text), -1
    for d in DIGIT_CHARS:
        i = text.find(d)
        if i >= 0:
            if i < first:
                first = i
            i = text.rfind(d)
            if i > last:
                last = i
    if last < 0:
        return
    for run in TRIGGER.finditer(text, first, min(len(text), last + 1 + _TRIGGER_REACH)):
        yield run.start(), run.end(1)


def all_runs(text: str) -> Iterator[tuple[int, int]]:
    """Every digit run: the reference the trigger must agree with (tests use it)."""
    for run in ALL_RUNS.finditer(text):
        yield run.span()


# --- validators for matched candidates --------------------------------------------------


def _intl_phone(m: re.Match[str]) -> Span | None:
    """The longest prefix of the digit groups that is a plausible E.164 number.

    "+1" needs exactly ten more digits passing NANP rules; other country codes need 8-15
    digits in all. A parenthesised "(0)" is the national trunk prefix, not dialled.
    """
    base = m.start()
    body = m.group()
    total = 0
    best_end = -1
    nanp = body[1] == "1"
    collected: list[str] = []
    for tok in INTL_TOKEN.finditer(body, 1):
        raw = tok.group()
        if raw == "(0)":
            continue
        number = raw.strip("()")
        collected.append(number)
        total += len(number)
        if raw.endswith(")"):
            continue  # a span never ends on the area-code parenthesis
        if nanp:
            if total == 11:
                if nanp_valid("".join(collected)[1:]):
                    best_end = base + tok.end()
                break
            if total > 11:
                break
        else:
            if total > 15:
                break
            if total >= 8:
                best_end = base + tok.end()
    return (base, best_end, "PHONE") if best_end > 0 else None


def _card(m: re.Match[str]) -> Span | None:
    """The longest group prefix that passes Luhn and a card network's IIN and length."""
    raw = m.group()
    if raw.isdigit():
        ok = luhn_valid(raw) and card_brand_plausible(raw)
        return (m.start(), m.end(), "CREDIT_CARD") if ok else None
    groups = SEP.split(raw)
    ends: list[int] = []
    offset = 0
    for g in groups:
        offset += len(g)
        ends.append(offset)
        offset += 1
    for k in range(len(groups), 2, -1):
        number = "".join(groups[:k])
        if 12 <= len(number) <= 19 and luhn_valid(number) and card_brand_plausible(number):
            return (m.start(), m.start() + ends[k - 1], "CREDIT_CARD")
    return None


def _iban(m: re.Match[str]) -> Span | None:
    """An IBAN cut to its country's length at a group boundary, then checked mod 97."""
    raw = m.group()
    length = IBAN_LENGTHS.get(raw[:2])
    if length is None:
        return None
    count = 0
    end = len(raw)
    for i, ch in enumerate(raw):
        if ch != " ":
            count += 1
            if count == length:
                end = i + 1
                break
    if count < length:
        return None
    if end < len(raw) and raw[end] != " ":
        return None  # the country's length ends inside a token: not this IBAN
    return (m.start(), m.start() + end, "IBAN") if iban_valid(raw[:end]) else None


def _ipv4(text: str, s: int, out: list[Span]) -> bool:
    """Whether a valid dotted quad starts at ``s`` (appended to ``out`` unless a version word
    comes before it: ``phones.in_version_context``)."""
    m = IPV4.match(text, s)
    if m is None:
        return False
    try:
        ipaddress.IPv4Address(m.group())
    except ValueError:
        return False
    if not in_version_context(text, s):  # "firmware 4.15.6.17" is a version: taken, not reported
        out.append((s, m.end(), "IP_ADDRESS"))
    return True


def _street_ok(m: re.Match[str], number_len: int) -> bool:
    """Not a title such as "10 Main Points": a house number of one or two digits before a
    plural suffix with nothing after it (no unit, no city) is taken for a count of things."""
    if number_len > 2:
        return True
    last = m.group().rsplit(" ", 1)[-1]
    return not (last.endswith("s") and last not in ("Pass", "Mews") and last[0].isupper())


def _may_be_keyworded(text: str, s: int, e: int, before: str, after: str) -> bool:
    """Whether the run is a standalone 6-17 digit run, not part of a number, date or range."""
    if not 6 <= e - s <= 17 or (after in ".," and text[e + 1 : e + 2].isdigit()):
        return False
    return before not in ".,-" and after != "-"


# --- the scan ---------------------------------------------------------------------------


class DigitScan:
    """One detector's digit-bearing entities, each tried anchored where it could start.

    The entities wanted are fixed when the detector is built, so each is a flag here;
    ``claimed`` (the end of the last checksum-validated span) is threaded through the
    per-position methods, which return it, updated when they find such a span.
    """

    def __init__(self, want: frozenset[str]) -> None:
        self.want = want
        self.phone = "PHONE" in want
        self.card = "CREDIT_CARD" in want
        self.ssn = "US_SSN" in want
        self.ip = "IP_ADDRESS" in want
        self.iban = "IBAN" in want
        self.crypto = "CRYPTO" in want
        self.street = "STREET_ADDRESS" in want
        self.keyed = bool(want & KEYED_ENTITIES)

    def scan(self, text: str, out: list[Span], runs: Iterable[tuple[int, int]]) -> None:
        """Candidates at the digit runs ``runs`` appended to ``out``; keyworded runs last."""
        n = len(text)
        keyed: list[tuple[int, int]] = []
        claimed = 0  # end of the last checksum-validated span: its inner digit runs are not retried
        for s, e in runs:
            if s < claimed:
                continue
            before = text[s - 1] if s else " "
            after = text[e] if e < n else " "
            if before == "+":
                if self.phone and (m := INTL_PHONE.match(text, s - 1)):
                    if span := _intl_phone(m):
                        out.append(with_extension(text, span))
                continue
            if before == "(" and self.phone:
                if e - s == 3 and (m := NANP.match(text, s - 1)):
                    out.append(with_extension(text, (m.start(), m.end(), "PHONE")))
                elif text[s] == "0" and (span := national_phone(text, s - 1)):
                    out.append(with_extension(text, span))
            if before in _WORD_CHARS:
                claimed = self._after_letters(text, s, e, out, claimed)
                continue
            if after in _WORD_CHARS and after not in DIGIT_CHARS:
                claimed = self._before_letters(text, s, e, out, claimed)
                continue
            if after == "." and self.ip and e - s <= 3 and _ipv4(text, s, out):
                continue
            claimed = self._standalone(text, s, e, after, out, claimed)
            if self.keyed and _may_be_keyworded(text, s, e, before, after):
                keyed.append((s, e))
        if keyed:
            out.extend(span for span in classify_runs(text, keyed) if span[2] in self.want)

    def _after_letters(self, text: str, s: int, e: int, out: list[Span], claimed: int) -> int:
        """A run glued to letters before it: only an IBAN's country code or bech32's "bc" may precede."""
        if self.iban and e - s >= 2 and text[s - 1] in _UPPER and s >= 2 and text[s - 2] in _UPPER:
            if (m := IBAN.match(text, s - 2)) and (span := _iban(m)):
                out.append(span)
                claimed = span[1]
        if self.crypto and text[s] == "1" and text[s - 2 : s] in ("bc", "BC"):
            if (m := BECH32.match(text, s - 2)) and segwit_address_valid(m.group()):
                out.append((m.start(), m.end(), "CRYPTO"))
                claimed = m.end()
        return claimed

    def _before_letters(self, text: str, s: int, e: int, out: list[Span], claimed: int) -> int:
        """A letter right after the digits: a base58 address, "221B", "5th", "3pm"..."""
        if self.crypto and text[s] in "13" and (m := BASE58.match(text, s)):
            if bitcoin_base58_valid(m.group()):
                out.append((s, m.end(), "CRYPTO"))
                return m.end()
        if self.street and e - s <= 6 and (m := STREET.match(text, s)) and _street_ok(m, e - s):
            out.append((s, m.end(), "STREET_ADDRESS"))
        return claimed

    def _standalone(self, text: str, s: int, e: int, after: str, out: list[Span], claimed: int) -> int:
        """A run between separators: grouped cards, SSNs, streets, NANP phones, contiguous cards."""
        length = e - s
        if after in " -":
            if self.card and length == 4 and (m := CARD.match(text, s)):
                if span := _card(m):
                    out.append(span)
                    claimed = span[1]
            if self.ssn and length == 3 and (m := SSN.match(text, s)):
                # no checksum: a part or reference number of the same shape is told apart by
                # the word before it ("Part 483-06-0224"), never by the area
                if ssn_valid(m.group(1), m.group(3), m.group(4)) and not after_identifier_word(text, s):
                    out.append((s, m.end(), "US_SSN"))
            if self.street and length <= 6 and (m := STREET.match(text, s)) and _street_ok(m, length):
                out.append((s, m.end(), "STREET_ADDRESS"))
        if self.phone and after in " .-(":
            if length == 3 or (length == 1 and text[s] == "1"):
                if m := NANP.match(text, s):
                    out.append(with_extension(text, (s, m.end(), "PHONE")))
            if text[s] == "0" and length <= 6 and (span := national_phone(text, s)):
                out.append(with_extension(text, span))
        if self.card and 12 <= length <= 19 and (m := CARD.match(text, s)):
            if span := _card(m):
                out.append(span)
                claimed = span[1]
        return claimed
