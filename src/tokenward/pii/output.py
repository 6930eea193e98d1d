"""The output screen: personal data the model produced on its own, redacted on the way out.

Opt-in per policy (``pii.output: redact``; docs/screening.md). It runs on the model's
answer *before* this request's placeholders are restored (it is registered after the
restorer, and transforms apply newest first), so the caller's own values, still
placeholders when it reads, are never touched; what it finds is what the model wrote.
It uses the built-in pattern detector (validated patterns, linear time) with the policy's
entity types, and writes ``[EMAIL]``-style markers as ``redact`` mode does.

- a whole answer: every choice's message content (and refusal, reasoning) or text;
- a stream: each choice's text is held back by ``HOLD`` characters (an entity still
  arriving is not sent half-seen), less where a found entity crosses that line (held from
  its start), and flushed, screened, with the choice's ``finish_reason`` or at the end of
  the stream. The detector reads the last ``CONTEXT`` characters already sent in front of
  the new text, so an account number's keyword is seen even when it went out earlier.

Tool-call arguments are not edited: they are the input of the caller's own tool. Counts
per entity type go into the decision record (``pii.output_redacted``) and the metrics;
never a value. The response cache stores an answer redacted the same way (s14_cache.py).
"""

from __future__ import annotations

from typing import Any, Callable

import msgspec

from ..wire.sse import SseEvent
from .spans import Span
from ..wire.codec import json_decode as _decode, json_encode as _encode
from .stream_edit import DELTA_FIELDS, Slot, StreamTextEdit


HOLD = 64       # characters held back per streamed field: the longest entity seen whole
CONTEXT = 64    # characters already sent that the detector reads in front of new text


class OutputRedactor(StreamTextEdit):
    __slots__ = ("find", "_record", "_on_redacted", "_sent", "counts")
    # (one per request, registered by the transform stage; pipeline/outbound.py applies it)
    TOOL_ARGUMENTS = False

    def __init__(self, find: Callable[[str], list[Span]], record: dict[str, Any],
                 on_redacted: Callable[[dict[str, int]], None] | None = None) -> None:
        super().__init__()
        self.find = find                   # text -> [(start, end, ENTITY)]
        self._record = record              # the request's pii record (counts only)
        self._on_redacted = on_redacted    # once, at the end: the counts (metrics)
        self._sent: dict[Slot, str] = {}   # per field: the last CONTEXT characters sent (raw)
        self.counts: dict[str, int] = {}

    # -- whole answers ------------------------------------------------------------------
    def whole(self, body: bytes) -> bytes:
        if b'"choices"' not in body:
            return body                    # an error envelope, or not an answer
        try:
            answer = _decode(body)
        except msgspec.DecodeError:
            return body
        choices = answer.get("choices") if isinstance(answer, dict) else None
        if not isinstance(choices, list):
            return body
        before = sum(self.counts.values())
        for choice in choices:
            if not isinstance(choice, dict):
                continue
            message = choice.get("message")
            holder, keys = (message, DELTA_FIELDS) if isinstance(message, dict) else (choice, ("text",))
            for key in keys:
                value = holder.get(key)
                if isinstance(value, str) and value:
                    holder[key] = self._redact(value, self.find(value), 0, len(value))
        self._done()
        return _encode(answer) if sum(self.counts.values()) != before else body

    # -- streams (StreamTextEdit) ---------------------------------------------------------
    def _touches(self, text: str) -> bool:
        return bool(text)

    def _split(self, text: str, key: Slot, finishing: bool) -> tuple[str, str]:
        sent = self._sent.get(key, "")
        seen = sent + text
        spans = [(a - len(sent), b - len(sent), label) for a, b, label in self.find(seen) if b > len(sent)]
        cut = len(text) if finishing else max(len(text) - HOLD, 0)
        for a, b, _ in spans:
            if a < cut < b:
                cut = max(a, 0)            # an entity crossing the line waits whole
        now = self._redact(text, spans, 0, cut)
        self._sent[key] = (sent + text[:cut])[-CONTEXT:]
        return now, text[cut:]

    def finish(self) -> list[SseEvent]:
        out = super().finish()
        self._done()
        return out

    # -----------------------------------------------------------------------------------------
    def _redact(self, text: str, spans: list[Span], start: int, end: int) -> str:
        """``text[start:end]`` with every span inside it (or begun before it) replaced."""
        out: list[str] = []
        pos = start
        for a, b, label in spans:
            a = max(a, start)              # begun in text already sent: the rest of it still goes
            if b <= a or a >= end or a < pos:
                continue
            out += (text[pos:a], f"[{label}]")
            self.counts[label] = self.counts.get(label, 0) + 1
            pos = min(b, end)
        if not out:
            return text[start:end]
        out.append(text[pos:end])
        return "".join(out)

    def _done(self) -> None:
        reported = self._record.get("output_redacted") or {}
        if self.counts and reported != self.counts:
            if self._on_redacted is not None:
                self._on_redacted({k: n - reported.get(k, 0) for k, n in self.counts.items() if n > reported.get(k, 0)})
            self._record["output_redacted"] = dict(self.counts)
