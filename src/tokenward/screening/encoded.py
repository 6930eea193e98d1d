"""Encoded payloads for the injection heuristic: base64, hex, ``\\uXXXX`` escapes, percent
encoding, rot13 and reversed text, decoded so the heuristic can read them again.

Bounded: at most ``MAX_BLOBS`` pieces per text, each at most ``MAX_CHARS`` characters
decoded, and the heuristic decodes at most ``MAX_DEPTH`` levels deep (base64 inside base64
is read; a third level is not). A piece is kept only if it decodes to printable UTF-8 text,
so checksums, keys and images (random bytes) are never read as text.

``pieces(text, long_spans, rot, rev)`` -> ``[(start, end, decoded, how)]``: offsets of the
encoded piece in ``text``, the decoded text, and how offsets in it map back into ``text``
(rot13: the same positions; reversed: mirrored; the others: the whole piece). The caller
finds the candidates cheaply, from the tokens it has already split: ``long_spans``, where a
token of at least ``LONG_TOKEN`` characters stands (base64 and hex are looked for only
there, widened over their alphabets), ``rot`` and ``rev``, whether a rot13'd or reversed
trigger word is among them; ``\\u`` escapes and percent encoding are looked for only when
the text has at least four of them.
"""

from __future__ import annotations

import base64
import binascii
import re
from itertools import islice
from urllib.parse import unquote

from .folding import _few_others

MAX_BLOBS, MAX_CHARS, MAX_DEPTH = 8, 4096, 2
LONG_TOKEN = 20          # a token at least this long may be base64 or hex

_B64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_")
_B32 = re.compile(r"[A-Z2-7]{16,}=*")
_BINARY = re.compile(r"(?:[01]{8}[ ]?){6,}")
_A85 = re.compile(r"<~[!-u\s]{10,}?~>")
_MORSE_RUN = re.compile(r"(?:[.-]{1,7}[ ]+(?:/[ ]+)?){8,}[.-]{1,7}")
_HEX_RUN = re.compile(r"(?:[0-9A-Fa-f]{2}[ :]?){10,}")
_UESC = re.compile(r"(?:\\u[0-9A-Fa-f]{4}|\\x[0-9A-Fa-f]{2}){4,}")
_PCT = re.compile(r"%[0-9A-Fa-f]{2}")
_ROT13 = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
                       "NOPQRSTUVWXYZABCDEFGHIJKLMnopqrstuvwxyzabcdefghijklm")
# folded tokens that, rot13'd or reversed, are the words an injection is made of
_WORDS = "ignore instructions previous system prompt disregard forget reveal password override secret"
ROT_CUES = frozenset(w.translate(_ROT13) for w in _WORDS.split())
REV_CUES = frozenset(w[::-1] for w in _WORDS.split())


def _printable(raw: bytes) -> str | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if len(text) < 8:
        return None
    good = sum(1 for c in text if c.isprintable() or c in "\n\t\r")
    letters = sum(1 for c in text if c.isalpha())
    return text if good >= 0.95 * len(text) and letters >= 0.5 * len(text) else None


def _b64(s: str) -> str | None:
    s = s.rstrip("=")
    s += "=" * (-len(s) % 4)
    try:
        raw = base64.b64decode(s, altchars=b"-_" if ("-" in s or "_" in s) else None, validate=True)
    except (binascii.Error, ValueError):
        return None
    return _printable(raw)


def _hex(s: str) -> str | None:
    try:
        return _printable(bytes.fromhex(re.sub(r"[ :]", "", s)))
    except ValueError:
        return None


def _escapes(s: str) -> str | None:
    try:
        return _printable(s.encode("ascii").decode("unicode_escape").encode("utf-8"))
    except (UnicodeDecodeError, UnicodeEncodeError):
        return None


def _percent(s: str) -> str | None:
    out = unquote(s, errors="strict") if "%" in s else None
    return out if out and out != s and _printable(out.encode("utf-8")) else None


def _widen(text: str, a: int, b: int) -> tuple[int, int]:
    """[a, b) widened over base64's alphabet (its + / = split a token) and the spaces of hex."""
    lo, hi, limit = a, b, MAX_CHARS * 2
    while lo > 0 and b - lo < limit and (text[lo - 1] in _B64_CHARS or (text[lo - 1] in " :" and lo > 1 and
                                                                         text[lo - 2] in _B64_CHARS)):
        lo -= 1
    while hi < len(text) and hi - a < limit and (text[hi] in _B64_CHARS or (text[hi] in " :" and hi + 1 < len(text)
                                                                            and text[hi + 1] in _B64_CHARS)):
        hi += 1
    return lo, hi


def _blob(piece: str) -> str | None:
    piece = piece.strip(" :")
    compact = re.sub(r"[ :]", "", piece)
    if _HEX_RUN.fullmatch(piece) and len(compact) % 2 == 0:
        return _hex(piece)
    if " " in piece:
        return None
    if _B32.fullmatch(piece) and len(piece) % 8 == 0:
        try:
            return _printable(base64.b32decode(piece))
        except (binascii.Error, ValueError):
            return None
    return _b64(piece)


def _binary(s: str) -> str | None:
    try:
        return _printable(bytes(int(b, 2) for b in s.split()))
    except ValueError:
        return None


def _ascii85(s: str) -> str | None:
    try:
        return _printable(base64.a85decode(s.encode("ascii"), adobe=True))
    except (ValueError, UnicodeEncodeError):
        return None


_MORSE = dict(zip(".- -... -.-. -.. . ..-. --. .... .. .--- -.- .-.. -- -. --- .--. --.- .-. ... - ..- ...- .-- -..- "
                  "-.-- --.. ----- .---- ..--- ...-- ....- ..... -.... --... ---.. ----. .-.-.- --..-- ..--.. "
                  ".--.-. -....-".split(), "abcdefghijklmnopqrstuvwxyz0123456789.,?@-"))


def _morse(s: str) -> str | None:
    words = [("".join(_MORSE.get(c, "") for c in w.split())) for w in s.split("/")]
    text = " ".join(w for w in words if w)
    return text if len(text) >= 8 else None


def maybe_encoded(text: str) -> bool:
    """Whether ``text`` may hold escapes, percent encoding, ascii85, binary, spaced hex or
    Morse (base64, hex runs, rot13 and reversed text are found from the tokens instead).
    One-character look-ups first (memchr: ~0.1 us per 2 KB; a longer needle costs ~1.5)."""
    return ("\\" in text or "%" in text or "~" in text or ("/" in text and " / " in text)
            or ("0" in text and ("0 0" in text or "1 0" in text or " 20 " in text)))


def pieces(text: str, long_spans: list[tuple[int, int]], rot: bool, rev: bool) -> list[tuple[int, int, str, str]]:
    """Decoded pieces of ``text``: (start, end, decoded text, how offsets map: 'same',
    'mirror' or 'whole')."""
    out: list[tuple[int, int, str, str]] = []
    if rot:
        out.append((0, min(len(text), MAX_CHARS), text[:MAX_CHARS].translate(_ROT13), "same"))
    if rev:
        tail = text[-MAX_CHARS:]
        out.append((len(text) - len(tail), len(text), tail[::-1], "mirror"))
    done = -1
    for a, b in long_spans[:MAX_BLOBS]:
        if a < done:
            continue
        lo, hi = _widen(text, a, b)
        done = hi
        for piece in dict.fromkeys((text[lo:hi], text[a:b])):      # widened, else the token alone
            plain = _blob(piece)
            if plain:
                out.append((lo, hi, plain[:MAX_CHARS], "whole"))
                break
    if text.count(" 20 ") >= 3:                       # hex bytes written apart: 20 is the space
        for m in islice(_HEX_RUN.finditer(text), MAX_BLOBS):
            plain = _hex(m.group()[:MAX_CHARS * 3])
            if plain:
                out.append((m.start(), m.end(), plain[:MAX_CHARS], "whole"))
    for gate, regex, decode in ((text.count("0 0") + text.count("1 0") >= 5, _BINARY, _binary),
                                ("<~" in text, _A85, _ascii85), (text.count(" / ") >= 3, _MORSE_RUN, _morse)):
        if gate:
            for m in islice(regex.finditer(text, 0, MAX_CHARS * 8), MAX_BLOBS):
                plain = decode(m.group())
                if plain:
                    out.append((m.start(), m.end(), plain[:MAX_CHARS], "whole"))
    if text.count("\\u") + text.count("\\x") >= 4:
        out += [(m.start(), m.end(), plain[:MAX_CHARS], "whole") for m in islice(_UESC.finditer(text), MAX_BLOBS)
                if (plain := _escapes(m.group()[:MAX_CHARS * 6]))]
    if text.count("%") >= 4 and len(_PCT.findall(text, 0, MAX_CHARS * 3)) >= 4:
        plain = _percent(text[:MAX_CHARS * 3])
        if plain:
            out.append((0, min(len(text), MAX_CHARS * 3), plain[:MAX_CHARS], "whole"))
    return out[:MAX_BLOBS]


# Cyrillic and Greek letters drawn like Latin ones, as written inside Latin words ("ІGNORE аll")
_CONFUSABLE = str.maketrans("АВЕНІЈКМОРСТХУаеіјорсхуѕԁɡΑΒΕΗΙΚΜΝΟΡΤΧΥΖορνκ",
                            "ABEHIJKMOPCTXYaeijopcxysdgABEHIKMNOPTXYZopvk")
_LOOKALIKES = frozenset(chr(c) for c in _CONFUSABLE)
_MIXED = re.compile(r"[A-Za-z][\u0370-\u03ff\u0400-\u04ff]|[\u0370-\u03ff\u0400-\u04ff][A-Za-z]")


def homoglyphs(text: str) -> str | None:
    """``text`` with look-alike Cyrillic and Greek letters made Latin (one for one), when a
    word mixes the scripts; else None."""
    odd = _few_others(text)                # None: mostly another script, not Latin text with look-alikes
    if not odd or odd.isdisjoint(_LOOKALIKES) or not _MIXED.search(text, 0, MAX_CHARS):
        return None
    return text[:MAX_CHARS].translate(_CONFUSABLE)
