"""Text normalization, before anything (screening, counting, the model) reads the text.

Each text the model will read is brought to one canonical form:

1. hidden characters are removed (plan ``hidden_characters: strip``, the default) or the
   request is refused (``refuse`` -> ``hidden_characters``). Hidden means invisible
   characters that can carry instructions a reviewer cannot see: zero-width characters
   (U+200B..U+200D, U+2060..U+2064 word joiner and invisible operators, U+FEFF, U+180E,
   U+00AD soft hyphen), bidirectional controls (U+200E/U+200F marks, U+061C, the
   U+202A..U+202E embeddings and overrides, U+2066..U+2069 isolates), Unicode tag
   characters (U+E0000..U+E007F, "ASCII smuggling") and the supplementary variation
   selectors (U+E0100..U+E01EF, the same trick one plane up);
2. NFKC, so compatibility look-alikes (fullwidth letters, ligatures, superscripts) read
   as the letters they stand for.

Stripping comes first, so a combining mark separated from its base by a hidden
character composes with it; NFKC never produces a hidden character (checked over every
code point in the tests), so the result is idempotent: ``text(text(s)) == text(s)``.

ASCII text is already normal and has no hidden characters; it returns at once, which is
the common case on the hot path.
"""

from __future__ import annotations

import re
import unicodedata

from ..errors import Reason, Refusal

HIDDEN_CLASS = (
    "\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
    "\U000e0000-\U000e007f\U000e0100-\U000e01ef"
)
_HIDDEN = re.compile(f"[{HIDDEN_CLASS}]")
# UTF-8 lead bytes of the hidden characters, with the prefixes that make them hidden. A
# single-byte search is a memchr; most non-ASCII text (accented Latin, CJK) has none of
# these lead bytes, so the slower character-class search is skipped.
_HIDDEN_PREFIXES = (
    (b"\xc2", (b"\xc2\xad",)), (b"\xd8", (b"\xd8\x9c",)), (b"\xe1", (b"\xe1\xa0\x8e",)),
    (b"\xe2", (b"\xe2\x80", b"\xe2\x81")), (b"\xef", (b"\xef\xbb\xbf",)), (b"\xf3", (b"\xf3\xa0",)),
)
_is_normalized = unicodedata.is_normalized
_normalize = unicodedata.normalize


def _may_hide(text: str) -> bool:
    data = text.encode()
    for lead, prefixes in _HIDDEN_PREFIXES:
        if lead in data:
            for prefix in prefixes:
                if prefix in data:
                    return True
    return False


def normal_form(text: str) -> str:
    """The canonical form, with hidden characters stripped (the pure function, for tests)."""
    if text.isascii():
        return text
    text = _HIDDEN.sub("", text)
    return text if _is_normalized("NFKC", text) else _normalize("NFKC", text)


class Normalizer:
    """Normalizes the texts of one request and keeps the counts for its decision record."""

    __slots__ = ("refuse", "hidden", "changed")

    def __init__(self, refuse_hidden: bool) -> None:
        self.refuse = refuse_hidden
        self.hidden = 0        # hidden characters stripped
        self.changed = 0       # texts that came out different

    def text(self, text: str, param: str) -> str:
        if text.isascii():
            return text
        out = text
        if _may_hide(out):
            out, count = _HIDDEN.subn("", out)  # one pass; the same object when nothing matched
            if count:
                if self.refuse:
                    raise Refusal(Reason.hidden_characters,
                                  f"{param} contains hidden characters (zero-width, bidi control or tag)",
                                  param=param)
                self.hidden += count
        if not _is_normalized("NFKC", out):
            out = _normalize("NFKC", out)
        if out is not text:
            self.changed += 1
        return out
