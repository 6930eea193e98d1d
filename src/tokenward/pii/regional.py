"""Phone numbers and street addresses of the regions a policy names (``pii.regions``).

Phones: a candidate is a run of digits with the separators people write (spaces, dots,
dashes, slashes, brackets, a leading ``+`` or ``00``), 7 to 20 digits; it is reported only
when Google's libphonenumber metadata (the ``phonenumbers`` package) says it is a *valid*
number: in its international form for any country, or in the national form of one of the
policy's regions (a Spanish ``612 345 678``, a German ``(030) 1234567``), valid in that
region's numbering plan (any +1 country for US) and written as that country writes it, its
trunk prefix included (``68129392`` parses as German 0681 29392, but is not written so). A
candidate right after a word that says it is something else (ISBN, IMEI, tracking, order,
part, serial, SKU, invoice, reference...: ``identifier_words``), shaped like one (13 digits
from 978/979, 15 plain digits, dotted version numbers, hyphenated groups of four) or the tail
of a longer grouped number is left alone; a phone the built-in shapes already found is not
validated again.

Streets: ``regional_streets`` (from the house number, in the order each language writes it).

``phonenumbers`` is imported only when a policy names regions (the ``regions`` extra).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .identifier_words import after_identifier_word
from .regional_streets import StreetFinder
from .spans import Span

if TYPE_CHECKING:
    from phonenumbers import PhoneNumber

REGIONS = ("US", "CA", "GB", "IE", "DE", "AT", "CH", "FR", "BE", "ES", "IT", "NL", "PT", "SE", "PL", "BR", "AU")
_PHONE = re.compile(r"(?<![\w.+/-])(?:\+|00)?\(?\d[\d ().\-/]{5,22}\d(?![\w/-]|\.\d)")
# Where a phone candidate may start: a digit run with six more digits close behind it (at most
# two separators between digits).
_DATE = re.compile(r"\b(?:\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.](?:19|20)\d{2})\b")
_STREET_INITIALS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZÀÁÂÃÄÅÆÇÈÉÊËÌÍÎÏÐÑÒÓÔÕÖØÙÚÛÜÝÞnN")
_PHONE_AHEAD = r"(?=(?:[ ().\-/]{0,2}[0-9]){6})"


def _digit_range(text: str) -> tuple[int, int]:
    """From the first digit to just past the last (memchr scans): where a run can start; the
    trigger's lookaheads read at most 30 characters past a run."""
    first, last = len(text), -1
    for d in "0123456789":
        i = text.find(d)
        if i >= 0:
            first = min(first, i)
            last = max(last, text.rfind(d))
    return first, min(len(text), last + 32)


def _trigger(phones: bool, streets: StreetFinder | None) -> re.Pattern[str]:
    """One pass over the text: at each digit run's first digit (the pattern begins with a digit,
    so re skips to digits in C), the groups ``phone``, ``first`` and ``last`` say which kinds of
    candidate it may start (a phone; a street with the number first or last); a run that may
    start none is not matched."""
    never = "(?!)"
    first = streets.first_lookahead if streets is not None else None
    last = streets.last_lookbehind if streets is not None else None
    return re.compile(
        rf"[0-9](?<![0-9][0-9])(?=[0-9]*+)(?:{_PHONE_AHEAD if phones else never}(?P<phone>))?"
        rf"(?:{first or never}(?P<first>))?(?:(?:{last or never})(?P<last>))?"
        rf"(?(phone)|(?(first)|(?(last)|(?!))))"
    )


class RegionalFinder:
    """PHONE and STREET_ADDRESS spans for the named regions (``find(text) -> [Span]``)."""

    def __init__(self, regions: Iterable[str], entities: frozenset[str]) -> None:
        self.regions = tuple(regions)
        unknown = sorted(set(self.regions) - set(REGIONS))
        if unknown:
            raise ValueError(f"unknown region {', '.join(unknown)}; known: {', '.join(REGIONS)}")
        import phonenumbers   # the regions extra: Google's libphonenumber metadata

        self._pn = phonenumbers
        self._codes = {r: phonenumbers.country_code_for_region(r) for r in self.regions}
        self._trunk: dict[str, str | None] = {}
        for r in self.regions:
            metadata = phonenumbers.PhoneMetadata.metadata_for_region(r)
            self._trunk[r] = metadata.national_prefix if metadata is not None else None
        self._phones = "PHONE" in entities
        self._streets = StreetFinder(self.regions) if "STREET_ADDRESS" in entities else None
        self._trigger = _trigger(self._phones, self._streets)

    def find(self, text: str, digits: bool = True, known: Iterable[Span] = ()) -> list[Span]:
        """Phones are tried only where a digit run has six more digits close behind it, streets
        at house numbers (``regional_streets``; French ones without a number from their street
        word): prose costs a pass over its digits. ``digits``: whether the text has any;
        ``known``: spans already found (a phone the built-in shapes found is not validated again:
        libphonenumber takes ~30 us a number)."""
        out: list[Span] = []
        claimed = 0
        streets = self._streets
        if streets is not None:
            streets.without_number(text, out)
        if not digits:
            return out
        found = {s for s, _, kind in known if kind == "PHONE"}
        for run in self._trigger.finditer(text, *_digit_range(text)):
            phone, first, last = run.groups()
            start = run.start()
            if phone is not None and start >= claimed:
                claimed = self._phone_at(text, start, claimed, found, out)
            if streets is None:
                continue
            if first is not None:
                streets.number_first(text, start, out)
            # the word before the number must be capitalised ("Roma, 12") or be "nº"
            if last is not None and text[text.rfind(" ", start - 34 if start > 34 else 0, start - 1) + 1] \
                    in _STREET_INITIALS:
                streets.number_last(text, start, out)
        return out

    def _phone_at(self, text: str, start: int, claimed: int, found: set[int], out: list[Span]) -> int:
        """The phone candidate at the digit run ``start`` (with a ``+`` or ``(`` before it); the
        end of the candidate is returned, so its inner runs are not candidates of their own."""
        first = start
        while start > 0 and text[start - 1] in "+(" and first - start < 2:
            start -= 1
        m = _PHONE.match(text, start)
        if m is None:
            return claimed
        if m.start() not in found and self._is_phone(text, m.start(), m.group()):
            out.append((m.start(), m.end(), "PHONE"))
        return m.end()

    def _is_phone(self, text: str, start: int, candidate: str) -> bool:
        digits = re.sub(r"\D", "", candidate)
        if not 7 <= len(digits) <= 17 or after_identifier_word(text, start):
            return False
        if start >= 2 and text[start - 1] in " -" and text[start - 2].isdigit():
            return False                                             # the tail of a longer number
        if re.fullmatch(r"\d+(?:\.\d+){1,3}", candidate) or _DATE.search(candidate):
            return False                                             # a version, a date, a timestamp
        plain = candidate.isdigit()
        if plain and (len(digits) == 15 or (len(digits) == 13 and digits[:3] in ("978", "979"))):
            return False                                             # an IMEI, an ISBN-13 / EAN
        if set(re.findall(r"[ ().\-/]", candidate)) == {"-"} and {len(g) for g in candidate.split("-")} == {4}:
            return False                                             # a code in groups of four
        pn = self._pn
        international = candidate.startswith(("+", "00"))
        for region in [None] if international else self.regions:
            try:
                number = pn.parse("+" + candidate[2:] if candidate.startswith("00") else candidate, region)
            except pn.NumberParseException:
                continue
            if not pn.is_valid_number(number):
                continue
            if region is None:
                return True
            # valid in the region's numbering plan (any +1 country for US), and written the way
            # that country writes it: "68129392" parses as German 0681 29392, but no one in
            # Germany writes it without its trunk prefix
            if number.country_code == self._codes[region] and self._as_written(number, region, digits):
                return True
        return False

    def _as_written(self, number: PhoneNumber, region: str, digits: str) -> bool:
        pn = self._pn
        national = re.sub(r"\D", "", pn.format_number(number, pn.PhoneNumberFormat.NATIONAL))
        return digits in (national, (self._trunk[region] or "") + national)


__all__ = ["REGIONS", "RegionalFinder"]
