"""The compiled shapes of the digit-bearing PII entities, and the trigger that finds them.

Each pattern is tried *anchored* (``pattern.match``) at a digit run that ``TRIGGER``
found, never searched over the whole text (see ``digit_scan``). Every pattern is linear
-- bounded or possessive repetitions over classes that do not overlap their neighbours
-- and built only from explicit ASCII classes and a literal space (never ``\\s``), so no
match contains a quote, a backslash or a control character.
"""

from __future__ import annotations

import re

__all__ = [
    "ALL_RUNS",
    "BASE58",
    "BECH32",
    "CARD",
    "IBAN",
    "INTL_PHONE",
    "INTL_TOKEN",
    "IPV4",
    "NANP",
    "SEP",
    "SSN",
    "STREET",
    "TRIGGER",
]

_A = re.ASCII

# Where a digit-bearing entity could start: a digit run's first digit whose neighbourhood
# fits at least one entity (6+ digits, a dotted quad, 3-3-4, 3-2-4, a 4-digit group, a
# house number before a capitalised word, "+CC", "(415)", an IBAN's check digits, bech32's
# "bc1", a base58 address). Every alternative is a lookaround, so a trigger consumes one
# character and never hides the next; the run's extent is captured as group 1. Prose
# numbers ("in 2024", "40% of 250 users") fail here, in C, without reaching Python.
TRIGGER = re.compile(
    r"""
    [0-9](?<![0-9][0-9])(?=([0-9]*+))
    (?:
        (?<=[+(A-Zc][0-9])
        (?:
            (?<=\+[1-9])
          | (?<=\([2-9])(?=[0-9]{2}\))
          | (?<=[A-Z][A-Z][0-9])(?=[0-9])
          | (?<=[bB][cC]1)
        )
      | (?<![A-Za-z_][0-9])
        (?:
            (?=[0-9]{5})
          | (?=[0-9]*+(?:[ .-][0-9(]|[A-Z]?[ ][A-Z0-9]|[A-Za-z(]))
            (?:
                (?=[0-9]{0,2}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9])
              | (?=[0-9]{2}[ .-][0-9]{3}[ .-][0-9]{4})
              | (?=[0-9]{2}[ -][0-9]{2}[ -][0-9]{4})
              | (?=[0-9]{3}[ -][0-9]{3})
              | (?=[0-9]{0,5}(?:-[0-9]{1,4})?[A-Z]?[ ](?:[A-Z]|[0-9]{1,3}(?:st|nd|rd|th)[ ]))
              | (?<=1)(?=[ .-]?(?:\([0-9]|[0-9]{3}[ .-]))
              | (?<=[13])(?=[1-9A-HJ-NP-Za-km-z]{25})
            )
        )
    )
    """,
    re.X | _A,
)

# Every digit run: the reference the trigger must agree with (tests use it).
ALL_RUNS = re.compile(r"[0-9]+")

# +CC then digit groups split by single separators; an optional "(0)"/"(415)" after the
# first group. Groups are possessive, so the separator decides where each one ends.
INTL_PHONE = re.compile(
    r"(?<![\w+])\+[1-9][0-9]*+(?:[ .-]?\([0-9]{1,4}\)[ .-]?[0-9]++)?(?:[ .-][0-9]++)*+",
    _A,
)
INTL_TOKEN = re.compile(r"\(?[0-9]+\)?")

# (415) 555-0132, 415-555-0132, 415.555.0132, 415 555 0132, optional leading "1 ".
# Area code and exchange start with 2-9 (NANP); not glued to other digits or dots.
NANP = re.compile(
    r"(?<![\w.+-])(?<![0-9][ .-])(?:1[ .-]?)?(?:\([2-9][0-9]{2}\)[ ]?|[2-9][0-9]{2}[ .-])"
    r"[2-9][0-9]{2}[ .-][0-9]{4}(?![\w]|[.-][0-9])",
    _A,
)

# 13-19 contiguous digits, or a 4-digit group then 2-4 groups of 3-6 (4-4-4-4, 4-6-5,
# 4-4-4-4-3); trailing groups that break the checksum are trimmed in Python.
CARD = re.compile(
    r"(?<![\w.-])(?:[0-9]{13,19}|[0-9]{4}(?:[ -][0-9]{3,6}){2,4})(?![\w]|[.-][0-9])",
    _A,
)
SEP = re.compile(r"[ -]")

SSN = re.compile(
    r"(?<![\w.-])(?<![0-9][ ])([0-9]{3})([ -])([0-9]{2})\2([0-9]{4})(?![\w]|[.-][0-9]|[ ][0-9])",
    _A,
)

IPV4 = re.compile(r"(?<![\w.])[0-9]{1,3}(?:\.[0-9]{1,3}){3}(?![\w]|\.[0-9])", _A)

IBAN = re.compile(
    r"(?<![\w])[A-Z]{2}[0-9]{2}(?:[ ]?[A-Z0-9]{4}){2,7}+(?:[ ]?[A-Z0-9]{1,4})?(?![\w])",
    _A,
)

BASE58 = re.compile(r"(?<![\w])[13][1-9A-HJ-NP-Za-km-z]{25,34}+(?![\w])", _A)
BECH32 = re.compile(r"(?<![\w])(?:bc|BC)1[02-9ac-hj-np-zAC-HJ-NP-Z]{6,87}+(?![\w])", _A)

_STREET_SUFFIX = (
    "Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Court|Ct|Way|Place|Pl|"
    "Terrace|Ter|Parkway|Pkwy|Highway|Hwy|Circle|Cir|Square|Sq|Trail|Trl|Alley|Plaza|"
    "Crescent|Loop|Pike|Row|Expressway|Expy|Freeway|Fwy"
)
_STATES = (
    "AL|AK|AZ|AR|CA|CO|CT|DE|DC|FL|GA|HI|ID|IL|IN|IA|KS|KY|LA|ME|MD|MA|MI|MN|MS|MO|MT|NE|"
    "NV|NH|NJ|NM|NY|NC|ND|OH|OK|OR|PA|RI|SC|SD|TN|TX|UT|VT|VA|WA|WV|WI|WY|PR|GU|VI|AS|MP"
)
STREET = re.compile(
    r"(?<![\w$#.,/-])"
    r"[0-9]{1,6}(?:-[0-9]{1,4})?[A-Z]?[ ]"  # house number: 742, 221B, 12-14
    r"(?:(?:N|S|E|W|NE|NW|SE|SW|North|South|East|West)\.?[ ])?"
    r"(?:(?:[A-Z][A-Za-z'-]*|[0-9]{1,3}(?:st|nd|rd|th))[ ]){1,4}?"  # street name, fewest words
    rf"(?:{_STREET_SUFFIX})\b"
    r"(?:[ ](?:N|S|E|W|NE|NW|SE|SW)\b)?"
    r"(?:\.?,?[ ](?:Apt|Apartment|Suite|Ste|Unit|Fl|Floor|Rm|Room|Bldg)\.?[ ]?\#?[A-Za-z0-9-]{1,6}\b"
    r"|\.?,?[ ]\#[A-Za-z0-9-]{1,6}\b)?"
    r"(?:\.?,[ ](?:[A-Z][A-Za-z'.-]*[ ]){0,3}[A-Z][A-Za-z'.-]*,?[ ]"
    rf"(?:{_STATES})[ ][0-9]{{5}}(?:-[0-9]{{4}})?\b)?",
    _A,
)
