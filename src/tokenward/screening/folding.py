"""Folding text for matching: casefold, NFKC, accents off, typographic punctuation and
leetspeak mapped, hidden characters removed; with an index map back into the original text
when that is not one character for one. The injection heuristic (injection.py) matches
folded text and reports offsets into the caller's text.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from typing import Callable

DROP = "\x00"    # what a removed character folds to
HIDDEN = re.compile("[\\x00\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
                     "\U000e0000-\U000e007f]+")
_LEET = str.maketrans("013457@$", "oieastas")
_PUNCT = dict(zip("‘’‚‛′“”„‟«»–—―‐‑−…", "'''''\"\"\"\"\"\"------.", strict=True))


def fold_char(c: str) -> str:
    if HIDDEN.match(c):
        return DROP
    if c in _PUNCT:
        return _PUNCT[c]
    s = unicodedata.normalize("NFKC", c)
    f = s.casefold()
    if len(f) > len(s):                                   # ß -> ss: keep one character for one
        f = s.lower() if len(s.lower()) == len(s) else s
    d = unicodedata.normalize("NFKD", f)
    bare = "".join(x for x in d if not unicodedata.combining(x))
    if bare != d:                                         # accents off: é -> e, й -> и, プ -> フ
        f = unicodedata.normalize("NFC", bare) if bare else DROP
    if len(f) > 1 and f.count(f[0]) == len(f):            # … -> ... -> .
        f = f[0]
    return f.translate(_LEET)


class _FoldTable(dict[int, str]):
    """code point -> folded text, for ``str.translate``: ASCII prefilled, the rest cached lazily."""

    def __missing__(self, cp: int) -> str:
        out = fold_char(chr(cp))
        return self.setdefault(cp, out) if len(self) < 65536 else out


FOLD = _FoldTable((i, fold_char(chr(i))) for i in range(128))
_WIDE = re.compile("[\\x00\\x80-\\U0010ffff]")                # what may fold to another length
TOK = {i: chr(i) if chr(i).isalnum() or chr(i) == "_" else " " for i in range(128)}
NONWORD = re.compile(r"[^\w ]")


_ASCII_BYTES = bytes(range(128))


def ascii_table(table: dict[int, str]) -> bytes:
    """``table``'s ASCII part as a ``bytes.translate`` table (bytes >= 0x80 left alone)."""
    if not all(len(table[i]) == 1 and table[i].isascii() for i in range(128)):
        raise ValueError("an ASCII character must map to one ASCII character")
    return bytes(ord(table[i]) for i in range(128)) + bytes(range(128, 256))


def _few_others(text: str) -> set[str] | None:
    """The distinct characters of ``text`` that are not ASCII; None when more than one in 8
    is, or more than 64 distinct ones are. (In UTF-8 the ASCII bytes are exactly the ASCII
    characters, so deleting them leaves the others, at C speed.)"""
    others = text.encode("utf-8", "surrogatepass").translate(None, _ASCII_BYTES).decode("utf-8", "surrogatepass")
    if len(others) * 8 > len(text) or len(odd := set(others)) > 64:
        return None
    return odd


def translate_mostly_ascii(text: str, ascii_bytes: bytes, other: Callable[[str], str],
                           odd: set[str] | None = None) -> str | None:
    """``text`` with each ASCII character mapped by ``ascii_bytes`` (as UTF-8 bytes) and each
    other character ``c`` replaced by ``other(c)`` (``str.replace``, once per distinct one);
    None when ``_few_others`` says the text is not mostly ASCII. Why: CPython's
    ``str.translate`` is fast only while the text is ASCII; from the first other character
    on it looks every character up in the dict, so one accented letter in 2 KB of English
    made folding ~7x slower. ``odd``: ``_few_others(text)`` when the caller has it."""
    if odd is None and (odd := _few_others(text)) is None:
        return None
    out = text.encode("utf-8", "surrogatepass").translate(ascii_bytes).decode("utf-8", "surrogatepass")
    changes = {c: v for c in odd if (v := other(c)) != c}
    if any(x in changes for v in changes.values() for x in v):      # a replacement replaced again
        return None
    for c, v in changes.items():
        out = out.replace(c, v)
    return out


def _fold_other(c: str) -> str:
    return FOLD[ord(c)]


_FOLD_ASCII = ascii_table(FOLD)


def _fold1(text: str, odd: set[str] | None) -> str:
    if text.isascii():
        return text.translate(FOLD)
    folded = None if odd is None else translate_mostly_ascii(text, _FOLD_ASCII, _fold_other, odd)
    return text.translate(FOLD) if folded is None else folded


class OffsetMap:
    """Folded-text offset -> offset in the original text, kept as the few places where
    folding changed a character's length (a hidden character removed, one expanded)
    rather than one entry per character: a text with one emoji joiner in 2 KB would
    otherwise pay for 2,000. ``m[p]`` for 0 <= p <= len(folded text)."""

    __slots__ = ("_starts", "_origins", "_fixed")

    def __init__(self, edits: list[tuple[int, int]]) -> None:
        """``edits``: (position in the text, length it folded to), in order."""
        starts, origins, fixed = [0], [0], [False]
        n = pos = 0
        for i, k in edits:
            n += i - pos                                  # the text before it maps one for one
            if k:                                         # an expansion: every piece maps to it
                starts.append(n)
                origins.append(i)
                fixed.append(True)
                n += k
            pos = i + 1
            starts.append(n)
            origins.append(pos)
            fixed.append(False)
        self._starts, self._origins, self._fixed = starts, origins, fixed

    def __getitem__(self, p: int) -> int:
        j = bisect_right(self._starts, p) - 1
        return self._origins[j] if self._fixed[j] else self._origins[j] + (p - self._starts[j])


def _length_edits(text: str, odd: set[str] | None) -> list[tuple[int, int]]:
    """(position, length it folds to) of each character that does not fold one for one, in
    order: looked for one by one (``str.find``) when the text has few such characters
    (``odd``: its distinct non-ASCII ones, from ``_few_others``)."""
    if odd is None:
        wide = ((m.start(), FOLD[ord(m.group())]) for m in _WIDE.finditer(text))
        return [(i, len(f.replace(DROP, ""))) for i, f in wide if len(f) != 1 or f == DROP]
    edits = []
    for c in odd | {DROP}:
        if len(f := FOLD[ord(c)]) != 1 or f == DROP:
            k, i = len(f.replace(DROP, "")), text.find(c)
            while i >= 0:
                edits.append((i, k))
                i = text.find(c, i + 1)
    return sorted(edits)


def fold(text: str) -> tuple[str, OffsetMap | list[int] | None]:
    """(folded text, offsets back into ``text``, or None when they are unchanged)."""
    odd = set() if text.isascii() else _few_others(text)   # read once, for the fold and the edits
    norm = _fold1(text, odd)
    if len(norm) == len(text) and DROP not in norm:
        return norm, None
    edits = _length_edits(text, odd)
    folded = norm.replace(DROP, "")
    if len(folded) == len(text) + sum(k - 1 for _, k in edits):
        return folded, OffsetMap(edits)
    # lower() changed a length (a character it expands): fold what is left one by one
    parts: list[str] = []
    pos = 0
    for i, k in edits:
        parts += (text[pos:i], FOLD[ord(text[i])].replace(DROP, ""))
        pos = i + 1
    raw = "".join(parts) + text[pos:]
    norm = raw.translate(FOLD)
    if len(norm) != len(raw):
        return norm, [min(i, len(text)) for i in range(len(norm) + 1)]
    return norm, OffsetMap(edits)


def fold_pattern(p: str) -> str:
    """A pattern's non-ASCII characters folded as the text's are (a mark folding to nothing
    is left out: the text loses it too)."""
    return "".join(c if c.isascii() else fold_char(c).replace(DROP, "") for c in p)
