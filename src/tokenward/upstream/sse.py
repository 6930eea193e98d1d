"""A sans-IO tap on a server-sent-events stream: bytes in, bytes out, usage captured.

The tap passes complete events through untouched (it holds back only a trailing partial
event), records the last non-null ``usage`` it sees (a streamed cumulative usage
overrides, never adds), counts content-bearing deltas for backends that report no usage
(llama.cpp ignores ``stream_options.include_usage``), and can drop the usage-only final
chunk that the gateway asked for on a client's behalf.
"""

from __future__ import annotations

import re

import msgspec

from ..reconcile.usage import Usage, from_reported

_BOUNDARY = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_USAGE = b'"usage"'
_DONE = b"data: [DONE]"
# A delta carrying generated text; the empty variants are role or finish chunks.
_MARKERS = tuple(
    (f'"{field}":{space}"'.encode(), f'"{field}":{space}""'.encode())
    for field in ("content", "text", "arguments") for space in ("", " ")
)
_decode = msgspec.json.decode


def _count_deltas(region: bytes) -> int:
    count = 0
    for marker, empty in _MARKERS:
        hits = region.count(marker)
        if hits:
            count += hits - region.count(empty)
    return count


def _event_data(event: bytes) -> bytes | None:
    lines = [line[5:].lstrip(b" ") for line in event.splitlines() if line.startswith(b"data:")]
    return b"\n".join(lines) if lines else None


class SseTap:
    __slots__ = ("_buf", "drop_usage_event", "usage", "content_events", "saw_done", "events_dropped")

    def __init__(self, drop_usage_event: bool) -> None:
        self._buf = b""
        self.drop_usage_event = drop_usage_event
        self.usage: Usage | None = None
        self.content_events = 0
        self.saw_done = False
        self.events_dropped = 0

    def feed(self, data: bytes) -> bytes:
        """Take bytes from the backend; return the bytes to pass to the client now."""
        if self._buf:
            data = self._buf + data
        end = self._last_boundary(data)
        if end < 0:
            self._buf = data
            return b""
        region, self._buf = data[:end], data[end:]
        self.content_events += _count_deltas(region)
        if not self.saw_done and _DONE in region:
            self.saw_done = True
        if _USAGE in region:
            return self._take_usage(region)
        return region

    def finish(self) -> bytes:
        """The end of the stream: whatever partial event is left goes out as it is."""
        rest, self._buf = self._buf, b""
        return rest

    @property
    def counted(self) -> Usage:
        """What the stream shows so far: backend-reported usage, else counted deltas."""
        if self.usage is not None:
            return self.usage
        return Usage(None, self.content_events, "counted")

    @staticmethod
    def _last_boundary(data: bytes) -> int:
        if b"\r" not in data:
            idx = data.rfind(b"\n\n")
            return idx + 2 if idx >= 0 else -1
        last = -1
        for match in _BOUNDARY.finditer(data):
            last = match.end()
        return last

    def _take_usage(self, region: bytes) -> bytes:
        kept: list[bytes] = []
        dropped = False
        pos = 0
        for match in _BOUNDARY.finditer(region):
            event = region[pos:match.end()]
            pos = match.end()
            if _USAGE in event and self._record_usage(event) and self.drop_usage_event:
                dropped = True
                self.events_dropped += 1
                continue
            kept.append(event)
        if pos < len(region):
            kept.append(region[pos:])
        return b"".join(kept) if dropped else region

    def _record_usage(self, event: bytes) -> bool:
        """Record the event's usage; True if it is a usage-only chunk (no choices)."""
        data = _event_data(event)
        if data is None:
            return False
        try:
            obj = _decode(data)
        except msgspec.DecodeError:
            return False
        if not isinstance(obj, dict):
            return False
        usage = from_reported(obj.get("usage"))
        if not usage.known:
            return False
        self.usage = usage
        return obj.get("choices") == []
