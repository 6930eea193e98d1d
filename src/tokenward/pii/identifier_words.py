"""Words that say the number after them is some other identifier, not personal data.

A part number written ``483-06-0224`` has the shape of a US Social Security number and
area rules cannot tell it from one (every area from 001 to 899 but 666 is issued); an
order number ``0696-4916-0921`` has the shape of a national phone number. What tells
them apart is the word before the number: ``Part 483-06-0224``, ``SKU 0696-4916-0921``,
``Reference: ...``, ``tracking no. ...``. The shapes that have no checksum (SSN-shaped
runs, national and regional phone numbers) are not reported right after such a word.

The word must end at most three separators before the number (``Part no.: 483-06-0224``
counts, ``part of the 483-06-0224 batch`` does not: the number is not the part's).
"""

from __future__ import annotations

import re

__all__ = ["after_identifier_word"]

_IDENTIFIER_WORD = re.compile(
    r"(?<![^\W_])(?:isbn(?:-?1[03])?|imei|imsi|iccid|meid|tracking|track|order|part|p/n|pn|sku|item|serial|s/n|"
    r"invoice|inv|ref|reference|version|build|model|ean|upc|gtin|asin|case|ticket|catalog(?:ue)?|cat|article|"
    r"art|product|lot|batch|barcode|parcel|shipment|consignment|waybill|awb|voucher|coupon|licen[cs]e key)"
    r"(?:[ ](?:no|nr|num|number|id|code|#)\.?)?[\s:#.-]{0,3}\Z",
    re.IGNORECASE,
)
_REACH = 32


def after_identifier_word(text: str, start: int) -> bool:
    """Whether the number at ``start`` follows a word naming another kind of identifier."""
    return _IDENTIFIER_WORD.search(text, max(0, start - _REACH), start) is not None
