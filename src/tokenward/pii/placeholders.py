"""Personal data swapped for placeholders on the way in, and back on the way out.

``Masker`` is one request's map. Texts are masked in document order; each value gets a
placeholder numbered in order of appearance per type (``{EMAIL_0}``, ``{EMAIL_1}``,
``{PHONE_0}``), the same value the same placeholder, so two callers asking the same
question send the backend the same text (and the cache one entry). ``redact`` mode writes
``[EMAIL]`` and keeps no map.

One escaping rule, the same for a whole answer and a stream, makes the round trip exact
whatever the caller typed. A *token* is ``{``, any number of ``~``, a name
(``EMAIL_0``: capitals and ``_``, then ``_`` and 1 to 6 digits) and ``}``:

- with no ``~`` it is a placeholder: restored to this request's value for that name, or
  left as it is when this request has none (a name the model made up; never another
  request's value: the map lives in this request only);
- with ``~``, it is text the caller typed: on the way in every token in the caller's own
  text gains one ``~`` after its brace (``{EMAIL_0}`` becomes ``{~EMAIL_0}``, ``{~EMAIL_0}``
  becomes ``{~~EMAIL_0}``), and on the way out every token with ``~`` loses one.

Tokens cannot overlap or span a placeholder (a name holds no brace), so what the caller
typed next to a masked value (``{alice@example.com}`` becomes ``{{EMAIL_0}}``) stays
plain text, and restore(mask(text)) is text for every text.

``Restorer`` is the response transform (pipeline/outbound.py) that puts the values back:

- a whole answer is restored on its raw JSON bytes (a token is plain ASCII, the same
  inside JSON strings, tool-call arguments included, at any depth);
- a stream is restored event by event with the same rule. An event with no ``{`` and
  nothing held back is passed as it is; otherwise its choices' texts are restored, and a
  tail that could still become a token is held back and put in front of the same choice's
  next text, or flushed with its ``finish_reason``, or at the end of the stream. The
  hold-back is bounded (at most 40 characters): of a tail ``{~~~~EMA`` the brace and all
  its ``~`` but one go out at once (they go out whatever follows: a token loses exactly
  one ``~``), and ``{~EMA`` is held with a note that its brace was sent.

Detected values never contain a quote, a backslash or a control character (the detectors
guarantee it), so a value is the same bytes inside a JSON string and inside a JSON string
nested in one (tool-call arguments). Nothing here is logged; the map lives in the
request's memory only.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from ..wire.sse import SseEvent
from ..wire.codec import json_encode as _encode
from .stream_edit import Slot, StreamTextEdit

_NAME = r"[A-Z][A-Z_]{0,30}_\d{1,6}"
# a token (module docstring): group 1 the tildes (none: a placeholder), group 2 the name
TOKEN = re.compile(r"\{(~*)(" + _NAME + r")\}")
LOOKALIKE = TOKEN      # caller text that must be escaped (the screening stage asks before masking)
_TOKEN_BYTES = re.compile(TOKEN.pattern.encode())
# a tail that could still become a token: at most "{", tildes, 32 name characters, 6 digits
_PARTIAL = re.compile(r"\{~*(?:[A-Z][A-Z_]{0,31}\d{0,6})?\Z")

_BRACE = ord("{")   # looked for as an int: a bytes argument to ``in`` costs a raised TypeError

Spans = Sequence[tuple[int, int, str]]


class Masker:
    """One request's placeholder map (``tokenize``), or the redaction of its values (``redact``)."""

    __slots__ = ("restore", "_counts", "_assigned", "originals", "neutralized", "masked")

    def __init__(self, restore: bool) -> None:
        self.restore = restore
        self._counts: dict[str, int] = {}
        self._assigned: dict[tuple[str, str], str] = {}
        self.originals: dict[str, str] = {}     # placeholder name (EMAIL_0) -> value
        self.neutralized: set[str] = set()      # names of tokens the caller typed (escaped)
        self.masked: dict[str, int] = {}        # entity type -> values masked (for the record)

    def mask(self, text: str, spans: Spans) -> str:
        """``text`` with each span replaced, and (tokenize) the caller's own tokens escaped."""
        edits = self._edits(text, spans)
        return _apply(text, edits) if edits else text

    def mask_pieces(self, pieces: Sequence[str], spans: Spans) -> list[str]:
        """What the model reads as one text, held in several pieces (a message's text
        parts): masked as their concatenation, each edit written back to the pieces it
        covers. A value split across pieces becomes its placeholder in the piece where it
        starts and nothing in the others; an escape goes to the piece holding the brace.
        ``"".join(result) == mask("".join(pieces), spans)``."""
        text = "".join(pieces)
        edits = self._edits(text, spans)
        if not edits:
            return list(pieces)
        starts = []
        offset = 0
        for piece in pieces:
            starts.append(offset)
            offset += len(piece)
        local: list[list[tuple[int, int, str]]] = [[] for _ in pieces]
        for start, end, replacement in edits:
            if start == end:            # an insertion right after a brace: the brace's piece
                k = _piece_at(starts, pieces, start - 1)
                local[k].append((start - starts[k], start - starts[k], replacement))
                continue
            first = _piece_at(starts, pieces, start)
            for k in range(first, len(pieces)):
                lo, hi = starts[k], starts[k] + len(pieces[k])
                if lo >= end:
                    break
                if hi <= start:
                    continue
                local[k].append((max(start, lo) - lo, min(end, hi) - lo, replacement if k == first else ""))
        return [_apply(piece, changes) if changes else piece for piece, changes in zip(pieces, local)]

    def _edits(self, text: str, spans: Spans) -> list[tuple[int, int, str]]:
        """``mask``'s changes as (start, end, replacement), in order: a span's placeholder,
        or a ``~`` inserted after the brace of a token the caller typed (tokenize)."""
        escape = self.restore and "{" in text
        out: list[tuple[int, int, str]] = []
        pos = 0
        for start, end, label in sorted(spans):
            if start < pos:
                continue                        # overlapping spans: the first one wins
            if escape:
                self._escape_edits(text, pos, start, out)
            out.append((start, end, self._placeholder(text[start:end], label)))
            pos = end
        if escape:
            self._escape_edits(text, pos, len(text), out)
        return out

    def _escape_edits(self, text: str, start: int, end: int, out: list[tuple[int, int, str]]) -> None:
        for match in TOKEN.finditer(text, start, end):
            self.neutralized.add(match.group(2))
            brace = match.start()
            out.append((brace + 1, brace + 1, "~"))

    def _placeholder(self, value: str, label: str) -> str:
        self.masked[label] = self.masked.get(label, 0) + 1
        if not self.restore:
            return f"[{label}]"
        key = (label, value)
        name = self._assigned.get(key)
        if name is None:
            number = self._counts.get(label, 0)
            self._counts[label] = number + 1
            name = self._assigned[key] = f"{label}_{number}"
            self.originals[name] = value
        return "{" + name + "}"

    def restorer(self) -> Restorer | None:
        if not self.restore or not (self.originals or self.neutralized):
            return None
        return Restorer(self.originals)


class Restorer(StreamTextEdit):
    """The response transform of one request's map (see the module docstring)."""

    __slots__ = ("_values", "_texts", "_opened")
    WHOLE_BYTES = True      # a token is the same ASCII at any depth of any JSON document

    def __init__(self, originals: dict[str, str], neutralized: object = None) -> None:
        super().__init__()
        self._values = {name.encode(): _encode(value)[1:-1] for name, value in originals.items()}
        self._texts = dict(originals)
        self._opened: set[Slot] = set()    # fields whose held tail's brace was already sent

    # -- whole answers ------------------------------------------------------------------
    def whole(self, body: bytes) -> bytes:
        if _BRACE not in body:
            return body
        return _TOKEN_BYTES.sub(self._bytes_value, body)

    def _bytes_value(self, match: re.Match[bytes]) -> bytes:
        tildes = match.group(1)
        if tildes:
            return b"{" + tildes[1:] + match.group(2) + b"}"
        value = self._values.get(match.group(2))
        return value if value is not None else match.group(0)

    def text(self, text: str) -> str:
        return TOKEN.sub(self._str_value, text) if "{" in text else text

    def _str_value(self, match: re.Match[str]) -> str:
        tildes = match.group(1)
        if tildes:
            return "{" + tildes[1:] + match.group(2) + "}"
        return self._texts.get(match.group(2), match.group(0))

    # -- streams (StreamTextEdit) ---------------------------------------------------------
    def _touches(self, text: str) -> bool:
        return "{" in text

    def _unreadable(self, event: SseEvent) -> SseEvent:
        return SseEvent(self.whole(event.raw)) if _BRACE in event.raw else event

    def _split(self, text: str, key: Slot, finishing: bool) -> tuple[str, str]:
        opened = key in self._opened     # ``text`` begins with a held "{~" whose brace went out
        if opened:
            self._opened.discard(key)
        held = ""
        at = -1 if finishing else text.rfind("{")
        if at == -1 or _PARTIAL.match(text, at) is None:
            now = self.text(text)
        else:
            tail = text[at:]
            tildes = len(tail) - 1 - len(tail[1:].lstrip("~"))
            if tildes:
                # the brace and all the tildes but one go out whatever follows
                now = self.text(text[:at]) + "{" + "~" * (tildes - 1)
                held = "{~" + tail[1 + tildes:]
                self._opened.add(key)
            else:
                now, held = self.text(text[:at]), tail
        # a restored text that begins at a held "{~" begins with its brace: sent already
        return (now[1:] if opened else now), held


def _piece_at(starts: list[int], pieces: Sequence[str], position: int) -> int:
    """The index of the piece holding character ``position`` of the joined text."""
    for k in range(len(pieces) - 1, -1, -1):
        if starts[k] <= position < starts[k] + len(pieces[k]):
            return k
    return 0


def _apply(text: str, changes: list[tuple[int, int, str]]) -> str:
    out, pos = [], 0
    for start, end, replacement in changes:
        out.append(text[pos:start])
        out.append(replacement)
        pos = end
    out.append(text[pos:])
    return "".join(out)
