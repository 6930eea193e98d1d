"""Personal data swapped for placeholders on the way in, and back on the way out.

``Masker`` is one request's map. Texts are masked in document order; each value gets a
placeholder numbered in order of appearance per type (``{EMAIL_0}``, ``{EMAIL_1}``,
``{PHONE_0}``), the same value the same placeholder, so two callers asking the same
question send the backend the same text (and the cache one entry). Text a caller typed
that looks like a placeholder is neutralized on the way in (``{EMAIL_0}`` becomes
``{{EMAIL_0}}``) and given back as typed: a placeholder is only ever restored from this
request's own map, never to a value the caller did not send. ``redact`` mode writes
``[EMAIL]`` and keeps no map.

``Restorer`` is the response transform (pipeline/outbound.py) that puts the values back:

- a whole answer is restored on its raw JSON bytes (a placeholder is plain ASCII, the same
  inside JSON strings, tool-call arguments included, at any depth);
- a stream is restored event by event. An event with no ``{`` and nothing held back is
  passed as it is; otherwise its choices' texts are restored, and the shortest tail that
  could still begin one of this request's placeholders is held back and put in front of
  the same choice's next text, or flushed with its ``finish_reason``, or at the end of the
  stream. The hold-back is at most one placeholder's length.

Detected values never contain a quote, a backslash or a control character (the detectors
guarantee it), so a value is the same bytes inside a JSON string and inside a JSON string
nested in one (tool-call arguments). Nothing here is logged; the map lives in the
request's memory only.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

import msgspec

from ..wire.sse import SseEvent
from .stream_edit import StreamTextEdit

_NAME = r"[A-Z][A-Z_]*_\d{1,4}"
LOOKALIKE = re.compile(r"(?<!\{)\{(" + _NAME + r")\}(?!\})")
_OUT_STR = re.compile(r"\{\{(" + _NAME + r")\}\}|\{(" + _NAME + r")\}")
_OUT_BYTES = re.compile(rb"\{\{(" + _NAME.encode() + rb")\}\}|\{(" + _NAME.encode() + rb")\}")
_encode = msgspec.json.encode
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
        self.neutralized: set[str] = set()      # names a caller typed, given back as typed
        self.masked: dict[str, int] = {}        # entity type -> values masked (for the record)

    def mask(self, text: str, spans: Spans) -> str:
        """``text`` with each span replaced; caller-typed look-alikes neutralized (tokenize)."""
        edits: list[tuple[int, int, str]] = [(start, end, self._placeholder(text[start:end], label))
                                             for start, end, label in spans]
        if self.restore and "{" in text:
            for match in LOOKALIKE.finditer(text):
                if not any(s < match.end() and match.start() < e for s, e, _ in edits):
                    self.neutralized.add(match.group(1))
                    edits.append((match.start(), match.end(), "{{" + match.group(1) + "}}"))
        if not edits:
            return text
        edits.sort()
        out, pos = [], 0
        for start, end, new in edits:
            out.append(text[pos:start])
            out.append(new)
            pos = end
        out.append(text[pos:])
        return "".join(out)

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
        return Restorer(self.originals, self.neutralized)


class Restorer(StreamTextEdit):
    """The response transform of one request's map (see the module docstring)."""

    __slots__ = ("_values", "_texts", "_neutral", "_candidates", "_longest")

    def __init__(self, originals: dict[str, str], neutralized: set[str]) -> None:
        super().__init__()
        self._values = {name.encode(): _encode(value)[1:-1] for name, value in originals.items()}
        self._texts = dict(originals)
        self._neutral = frozenset(neutralized)
        self._candidates = tuple("{" + name + "}" for name in originals) + tuple(
            "{{" + name + "}}" for name in neutralized)
        self._longest = max(len(c) for c in self._candidates)

    # -- whole answers ------------------------------------------------------------------
    def whole(self, body: bytes) -> bytes:
        if _BRACE not in body:
            return body
        return _OUT_BYTES.sub(self._bytes_value, body)

    def _bytes_value(self, match: re.Match) -> bytes:
        doubled = match.group(1)
        if doubled is not None:
            return b"{" + doubled + b"}" if doubled.decode() in self._neutral else match.group(0)
        value = self._values.get(match.group(2))
        return value if value is not None else match.group(0)

    def text(self, text: str) -> str:
        return _OUT_STR.sub(self._str_value, text) if "{" in text else text

    def _str_value(self, match: re.Match) -> str:
        doubled = match.group(1)
        if doubled is not None:
            return "{" + doubled + "}" if doubled in self._neutral else match.group(0)
        return self._texts.get(match.group(2), match.group(0))

    # -- streams (StreamTextEdit) ---------------------------------------------------------
    def _touches(self, text: str) -> bool:
        return "{" in text

    def _unreadable(self, event: SseEvent) -> SseEvent:
        return SseEvent(self.whole(event.raw)) if _BRACE in event.raw else event

    def _split(self, text: str, key: tuple, finishing: bool) -> tuple[str, str]:
        # decided on the text as sent: "{{EMAIL_0}" is the start of a neutralized
        # "{{EMAIL_0}}", not a placeholder to restore
        keep = 0 if finishing else self._hold(text)
        if keep:
            return self.text(text[:-keep]), text[-keep:]
        return self.text(text), ""

    def _hold(self, text: str) -> int:
        """Length of the tail that could still begin one of this request's placeholders (at
        most one placeholder's length; a complete one is not held)."""
        p = text.find("{", max(0, len(text) - self._longest + 1))
        while p != -1:
            tail = text[p:]
            for candidate in self._candidates:
                if candidate.startswith(tail) and candidate != tail:
                    return len(tail)
            p = text.find("{", p + 1)
        return 0
