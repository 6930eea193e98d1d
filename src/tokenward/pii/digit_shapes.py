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
    "NATIONAL_PHONE",
    "PHONE_EXTENSION",
    "SEP",
    "SSN",
    "STREET",
    "TRIGGER",
    "USPS_SUFFIXES",
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
          | (?<=\(0)(?=[0-9]{0,4}\))
          | (?<=[A-Z][A-Z][0-9])(?=[0-9])
          | (?<=[bB][cC]1)
        )
      | (?<![A-Za-z_][0-9])
        (?:
            (?=[0-9]{5})
          | (?=[0-9]*+(?:[ .-][0-9(]|[ ]-|[A-Z]?[ ][A-Z0-9]|[A-Za-z(]))
            (?:
                (?=[0-9]{0,2}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9])
              | (?=[0-9]{2}[ .-][0-9]{3}[ .-][0-9]{4})
              | (?=[0-9]{2}[ -][0-9]{2}[ -][0-9]{4})
              | (?=[0-9]{3}[ -][0-9]{3})
              | (?<=0)(?=[0-9]{0,5}(?:[ .-]|[ ]-[ ]?|-[ ])[0-9]{2})
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
    r"[2-9][0-9]{2}[ .-][0-9]{4}(?:(?=[xX][0-9])|(?![\w]|[.-][0-9]))",
    _A,
)

# A national number behind its trunk prefix 0 ("0121 234 5678", "(0161) 496 0066",
# "06 12 34 56 78", "03-1234-5678", "08-12 34 56"), or an international one behind the
# call prefix 00 ("0044 20 7946 0958", "001-780-563-6083"): groups split by single
# separators; digit counts, dates and hyphen shapes are checked in ``phones``.
NATIONAL_PHONE = re.compile(
    r"(?<![\w.+-])(?:\(0[1-9][0-9]{0,4}\)|0[0-9]{1,5})"
    r"(?:(?:(?<=\))[ ]?-?|[ ]?-[ ]?|[ .])[0-9]{2,10}){1,5}+"
    r"(?:(?=[ ]?(?:x|X|ext\.?|Ext\.?|EXT\.?|extension|\#)[ ]?[0-9])|(?![\w]|[.-][0-9]))",
    _A,
)
# An extension after a number: "x8735", " ext. 12", " extension 4", " #12".
PHONE_EXTENSION = re.compile(r"[ ]?(?:x|X|ext\.?|Ext\.?|EXT\.?|extension|\#)[ ]?[0-9]{1,6}(?![\w])", _A)

# 12-19 contiguous digits, or a 4-digit group then 2-4 groups of 3-6 (4-4-4-4, 4-6-5,
# 4-4-4-4-3) and maybe a last short group (a 13-digit Visa as 4-4-4-1, Diners as 4-4-4-2); trailing groups that break the checksum are trimmed in Python.
CARD = re.compile(
    r"(?<![\w.-])(?:[0-9]{12,19}|[0-9]{4}(?:[ -][0-9]{3,6}){2,4}(?:[ -][0-9]{1,2})?)(?![\w]|[.-][0-9])",
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

# USPS Publication 28, Appendix C1: every primary street suffix name and its standard
# abbreviation (the abbreviations in title case as people type them: "Ave", "Xing").
_USPS_SUFFIXES = """
Alley Aly Anex Anx Arcade Arc Avenue Ave Av Bayou Byu Beach Bch Bend Bnd Bluff Blf Bluffs Blfs
Bottom Btm Boulevard Blvd Branch Br Bridge Brg Brook Brk Brooks Brks Burg Bg Burgs Bgs Bypass Byp
Camp Cp Canyon Cyn Cape Cpe Causeway Cswy Center Ctr Centers Ctrs Circle Cir Circles Cirs Cliff Clf
Cliffs Clfs Club Clb Common Cmn Commons Cmns Corner Cor Corners Cors Course Crse Court Ct Courts Cts
Cove Cv Coves Cvs Creek Crk Crescent Cres Crest Crst Crossing Xing Crossroad Xrd Crossroads Xrds
Curve Curv Dale Dl Dam Dm Divide Dv Drive Dr Drives Drs Estate Est Estates Ests Expressway Expy
Extension Ext Extensions Exts Fall Falls Fls Ferry Fry Field Fld Fields Flds Flat Flt Flats Flts
Ford Frd Fords Frds Forest Frst Forge Frg Forges Frgs Fork Frk Forks Frks Fort Ft Freeway Fwy
Garden Gdn Gardens Gdns Gateway Gtwy Glen Gln Glens Glns Green Grn Greens Grns Grove Grv Groves Grvs
Harbor Hbr Harbors Hbrs Haven Hvn Heights Hts Highway Hwy Hill Hl Hills Hls Hollow Holw Inlet Inlt
Island Is Islands Iss Isle Junction Jct Junctions Jcts Key Ky Keys Kys Knoll Knl Knolls Knls
Lake Lk Lakes Lks Land Landing Lndg Lane Ln Light Lgt Lights Lgts Loaf Lf Lock Lck Locks Lcks
Lodge Ldg Loop Mall Manor Mnr Manors Mnrs Meadow Mdw Meadows Mdws Mews Mill Ml Mills Mls Mission Msn
Motorway Mtwy Mount Mt Mountain Mtn Mountains Mtns Neck Nck Orchard Orch Oval Overpass Opas Park
Parks Parkway Pkwy Parkways Pass Passage Psge Path Pike Pine Pne Pines Pnes Place Pl Plain Pln
Plains Plns Plaza Plz Point Pt Points Pts Port Prt Ports Prts Prairie Pr Radial Radl Ramp Ranch
Rnch Rapid Rpd Rapids Rpds Rest Rst Ridge Rdg Ridges Rdgs River Riv Road Rd Roads Rds Route Rte Row
Rue Run Shoal Shl Shoals Shls Shore Shr Shores Shrs Skyway Skwy Spring Spg Springs Spgs Spur Spurs
Square Sq Squares Sqs Station Sta Stravenue Stra Stream Strm Street St Streets Sts Summit Smt
Terrace Ter Throughway Trwy Trace Trce Track Trak Trafficway Trfy Trail Trl Trailer Trlr Tunnel
Tunl Turnpike Tpke Underpass Upas Union Un Unions Uns Valley Vly Valleys Vlys Viaduct Via View Vw
Views Vws Village Vlg Villages Vlgs Ville Vl Vista Vis Walk Walks Wall Way Ways Well Wl Wells Wls
"""
USPS_SUFFIXES: frozenset[str] = frozenset(_USPS_SUFFIXES.split())
_STREET_SUFFIX = "|".join(sorted(USPS_SUFFIXES, key=lambda w: (-len(w), w)))
# USPS Publication 28, Appendix C2: the secondary unit designators that take a number.
_UNITS = (
    "Apartment|Apt|Building|Bldg|Department|Dept|Floor|Fl|Hangar|Hngr|Lot|Office|Ofc|Penthouse|Ph|"
    "Pier|Room|Rm|Slip|Space|Spc|Stop|Suite|Ste|Trailer|Trlr|Unit"
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
    rf"(?:\.?,?[ ](?:{_UNITS})\.?[ ]?\#?[A-Za-z0-9-]{{1,6}}\b"
    r"|\.?,?[ ]\#[A-Za-z0-9-]{1,6}\b)?"
    r"(?:\.?,[ ](?:[A-Z][A-Za-z'.-]*[ ]){0,3}[A-Z][A-Za-z'.-]*,?[ ]"
    rf"(?:{_STATES})[ ][0-9]{{5}}(?:-[0-9]{{4}})?\b)?",
    _A,
)
