"""Folding text for matching: casefold, NFKC, accents off, typographic punctuation and
leetspeak mapped, hidden characters removed; with an index map back into the original text
when that is not one character for one. The injection heuristic (injection.py) matches
folded text and reports offsets into the caller's text.
"""

from __future__ import annotations

import re
import unicodedata

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


class _FoldTable(dict):
    """code point -> folded text, for ``str.translate``: ASCII prefilled, the rest cached lazily."""

    def __missing__(self, cp: int) -> str:
        out = fold_char(chr(cp))
        return self.setdefault(cp, out) if len(self) < 65536 else out


FOLD = _FoldTable((i, fold_char(chr(i))) for i in range(128))
_SPECIAL = re.compile("[013457@$\\x00\\x80-\\U0010ffff]")   # what str.lower leaves to fold
TOK = {i: chr(i) if chr(i).isalnum() or chr(i) == "_" else " " for i in range(128)}
NONWORD = re.compile(r"[^\w ]")


def _fold1(text: str) -> str:
    if text.isascii():
        return text.translate(FOLD)
    low = text.lower()                                    # mostly ASCII: fold only what lower() leaves
    if len(low) == len(text) and (len(text.encode("utf-8", "surrogatepass")) - len(text)) * 8 <= len(text):
        return _SPECIAL.sub(lambda m: FOLD[ord(m.group())], low)
    return text.translate(FOLD)


def fold(text: str) -> tuple[str, list[int] | None]:
    """(folded text, index map into ``text``, or None when offsets are unchanged)."""
    norm = _fold1(text)
    if len(norm) == len(text) and DROP not in norm:
        return norm, None
    parts, idx, pos = [], [], 0                           # replace what does not fold one for one
    for m in _SPECIAL.finditer(text):
        f = FOLD[ord(m.group())]
        if len(f) != 1 or f == DROP:
            i, f = m.start(), f.replace(DROP, "")
            parts += (text[pos:i], f)
            idx += [*range(pos, i), *[i] * len(f)]
            pos = i + 1
    idx += range(pos, len(text) + 1)
    raw = "".join(parts) + text[pos:]
    norm = _fold1(raw)
    if len(norm) != len(raw):                             # folding is idempotent; were it not, offsets stay valid
        norm = raw.translate(FOLD)
        idx = idx if len(norm) == len(raw) else [min(i, len(text)) for i in range(len(norm) + 1)]
    return norm, idx


def fold_pattern(p: str) -> str:
    return "".join(c if c.isascii() else fold_char(c) for c in p)
