"""Phone numbers beyond the North American and ``+CC`` forms: national formats behind a
trunk prefix, the ``00`` call prefix, and extensions; and the version context that keeps
a dotted version number from being read as an IPv4 address.

National numbers (``digit_shapes.NATIONAL_PHONE``) have no checksum, so the shape carries
the proof, checked here:

- ``0`` then a non-zero digit (a trunk prefix: UK ``0121 234 5678``, ``0300 123 4567``,
  German ``030 123456``, French ``06 12 34 56 78``, Dutch ``06 12345678``, Japanese
  ``03-1234-5678``, Australian ``(02) 1234 5678``), 8 to 12 digits in all; or ``00`` then
  a country code and 9 to 14 digits (``0044 20 7946 0958``, ``001-780-563-6083``);
- at least two groups: a bare digit run is a phone number only next to a phone keyword
  (``keyworded``);
- not the North American 3-3-4 shape in hyphens or dots (``012-345-6789``: NANP's rules
  decide that one), and not a group of a longer code (``DE89 3704 0044 0532 0130 01``);
- not a date (``05-12-2024``, ``05.12.2024``: two short groups then a year);
- written with hyphens only, it must not end on a 2-digit group (part and order numbers
  such as ``023-4567-89``; phone numbers in hyphens end on 3 or 4 digits) nor be groups of
  four only (``0696-4916-0921``);
- not the tail of a longer grouped number (``9400 11162 0079 7058 3499 30``), and not right
  after a word naming another identifier (``SKU``, ``tracking no.``: ``identifier_words``).

Measured against Google's libphonenumber (the ``phonenumbers`` package, which the
Presidio extra installs): ``PhoneNumberMatcher`` needs the caller's region to read a
national number, so covering 13 countries means 13 passes over the text; on 2 KB of
prose with numbers one pass costs ~2 ms against ~20 us for the whole built-in detector
(docs/pii-recall.md has the figures). The shapes here are what the gateway runs.
"""

from __future__ import annotations

import re

from .digit_shapes import NATIONAL_PHONE, PHONE_EXTENSION
from .identifier_words import after_identifier_word
from .spans import Span

__all__ = ["in_version_context", "national_phone", "with_extension"]

_GROUP = re.compile(r"[0-9]+")
_SEPARATORS = re.compile(r"[ .()-]+")
_CODE_GROUP = re.compile(r"(?<![A-Za-z0-9])[A-Z0-9]{4}")
_DIGIT = re.compile(r"[0-9]")
_DIGITS = frozenset("0123456789")


def national_phone(text: str, s: int) -> Span | None:
    """A national or ``00``-prefixed number starting at ``s`` (the ``0`` or its ``(``)."""
    m = NATIONAL_PHONE.match(text, s)
    if m is None:
        return None
    raw = m.group()
    groups = _GROUP.findall(raw)
    digits = "".join(groups)
    if len(groups) < 2:
        return None
    if digits.startswith("00"):
        if not (digits[2] != "0" and 9 <= len(digits) - 2 <= 14):
            return None
    elif not (digits[1] != "0" and 8 <= len(digits) <= 12):
        return None
    if [len(g) for g in groups] == [3, 3, 4] and " " not in raw:
        return None  # the North American shape: NANP's rules decide (012-345-6789 is not a number)
    if s >= 5 and text[s - 1] == " " and _CODE_GROUP.fullmatch(text, s - 5, s - 1) and _DIGIT.search(text, s - 5, s - 1):
        return None  # inside a grouped code: "DE89 3704 0044 0532 0130 01"
    if len(groups) == 3 and len(groups[2]) == 4 and len(groups[0]) <= 2 and len(groups[1]) <= 2 \
            and groups[2][:2] in ("19", "20"):
        return None  # a date
    seps = set(_SEPARATORS.findall(raw.lstrip("(")))
    if seps == {"-"} and (len(groups[-1]) <= 2 or {len(g) for g in groups} == {4}):
        return None  # a part or order number: 023-4567-89, 0696-4916-0921
    if s >= 2 and text[s - 1] in " -" and text[s - 2] in _DIGITS:
        return None  # the tail of a longer grouped number: "9400 11162 0079 7058 3499 30"
    if after_identifier_word(text, s):
        return None  # "SKU 0483-9116-2616", "tracking no. 0079 7058 3499 30"
    return (m.start(), m.end(), "PHONE")


def with_extension(text: str, span: Span) -> Span:
    """The phone span widened over an extension written right after it (``x8735``, ``ext. 12``)."""
    s, e, kind = span
    if e < len(text) and text[e] in " xXe#" and (m := PHONE_EXTENSION.match(text, e)):
        return (s, m.end(), kind)
    return span


# Words after which a dotted number is a version, not an address: "firmware 4.15.6.17".
_VERSION_WORD = re.compile(
    r"\b(?:versions?|ver|vers|firmware|fw|releases?|released|build|builds|driver|drivers|kernel|rev|"
    r"revision|patch|patched|upgrade|upgraded|upgrading|update|updated|updating|bump|bumped|bumping|"
    r"pinned|pin|sdk|package|library|lib|edition|v)\b",
    re.I | re.A,
)
# Words that say the number is an address after all: "update the host at 10.0.0.1".
_ADDRESS_WORD = re.compile(r"\b(?:ip|ips|ipv4|address|addr|host|hostname|server|gateway|dns|subnet|ping|"
                           r"connect|connects|connected|proxy)\b", re.I | re.A)
_REACH = 40


def in_version_context(text: str, s: int) -> bool:
    """Whether the dotted number at ``s`` follows a version word on the same line (within
    40 characters, no address word in between)."""
    lo = max(0, s - _REACH)
    nl = text.rfind("\n", lo, s)
    if nl >= 0:
        lo = nl + 1
    window = text[lo:s]
    last = None
    for last in _VERSION_WORD.finditer(window):
        pass
    if last is None:
        return False
    return _ADDRESS_WORD.search(window, last.end()) is None
