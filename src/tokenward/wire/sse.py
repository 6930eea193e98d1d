"""Server-sent events, sans-IO: bytes in, whole events out.

``SseSplitter.feed`` takes whatever the backend sent and returns the complete events in
it (an event ends at a blank line: ``\\n\\n``, ``\\r\\n\\r\\n`` or ``\\r\\r``), keeping a
trailing partial event for the next call. Each ``SseEvent`` keeps its exact bytes, so an
event nobody needs to change goes to the client as the backend wrote it, and its
``data`` (the ``data:`` lines joined, as the SSE spec says) for the readers that need it,
and ``malformed``: a line that is neither a comment nor an SSE field (``data``, ``event``,
``id``, ``retry``), or bytes that are not UTF-8; the relay ends the stream there.
"""

from __future__ import annotations

import re

from .chunks import Chunk

_BOUNDARY = re.compile(rb"\r\n\r\n|\n\n|\r\r")
DONE_DATA = b"[DONE]"
# A byte is looked for as an int: ``b"\r" in data`` makes bytes.__contains__ try its
# argument as an int first, raising and clearing a TypeError on every call (per event here).
_CR = ord("\r")


# The fields of the SSE framing (a line "name: value", or "name" alone); any other line but
# a comment (":...") makes the event malformed, as does text that is not UTF-8.
_FIELDS = frozenset((b"data", b"event", b"id", b"retry"))


class SseEvent:
    __slots__ = ("raw", "data", "parsed", "malformed")

    def __init__(self, raw: bytes, read: bool = True) -> None:
        self.raw = raw
        self.parsed: Chunk | None = None  # the typed chunk, once a reader decoded it (wire/chunks.py)
        if not read:
            # an event the gateway wrote itself (dialects/exit.py): only its bytes are used
            self.data: bytes | None = None
            self.malformed = False
        elif raw.startswith(b"data: ") and raw.count(b"\n") <= 2 and _CR not in raw:
            self.data = raw[6:].rstrip(b"\n")   # the common shape: one data line
            self.malformed = False
        else:
            self.data, self.malformed = _read(raw)

    @property
    def done(self) -> bool:
        """The OpenAI end-of-stream marker, ``data: [DONE]``."""
        return self.data == DONE_DATA

    def __repr__(self) -> str:
        return f"SseEvent({self.raw[:60]!r})"


def _read(raw: bytes) -> tuple[bytes | None, bool]:
    """(the ``data:`` lines joined, None if none: a comment (": ping") or an event with no
    data; whether the event breaks the framing)."""
    lines = []
    malformed = False
    for line in raw.splitlines():
        if line.startswith(b"data:"):
            lines.append(line[5:])
        elif line and line[:1] != b":" and line.split(b":", 1)[0] not in _FIELDS:
            malformed = True
    if not malformed:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            malformed = True
    if not lines:
        return None, malformed
    return b"\n".join(line[1:] if line[:1] == b" " else line for line in lines), malformed


class SseSplitter:
    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, data: bytes) -> list[SseEvent]:
        if self._buf:
            data = self._buf + data
        if _CR not in data:
            events = data.split(b"\n\n")
            self._buf = events.pop()
            return [SseEvent(e + b"\n\n") for e in events if e]
        out = []
        pos = 0
        for match in _BOUNDARY.finditer(data):
            if match.start() > pos:
                out.append(SseEvent(data[pos:match.end()]))
            pos = match.end()
        self._buf = data[pos:]
        return out

    def finish(self) -> bytes:
        """What is left when the stream ends: a partial event, never delivered as one."""
        rest, self._buf = self._buf, b""
        return rest
