"""Editing a native upstream's answer in its own API: the personal-data restorer and the output
redactor on a Responses or Messages answer that was not translated from chat.

The editors (pii/placeholders.py ``Restorer``, pii/output.py ``OutputRedactor``) know the
chat answer's shape. ``NativeEdit`` gives them a dialect's instead, with the same contract:

- a stream, event by event: each event that carries a piece of generated text
  (native.py ``text_delta``) is edited through the editor's per-slot hold-back
  (``StreamTextEdit.edit_text``), so a placeholder split across two deltas is restored
  whole; an event whose text is all held back is not sent; what a slot still holds goes
  out, in a copy of its last delta event, before the next event that is not a delta of
  the same slot (the block's or item's end) and at the end of the stream;
- events that repeat a whole text (``.done``, ``output_item.done``, ``response.completed``)
  and a whole answer: edited at the byte level by an editor that can
  (``StreamTextEdit.WHOLE_BYTES``: a placeholder is an ASCII token, the same at any depth
  of any JSON), else text by text.

Tool inputs are edited only by an editor that edits tool arguments (``TOOL_ARGUMENTS``).
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..pii.stream_edit import StreamTextEdit
from ..wire.sse import SseEvent
from . import native
from ..wire.codec import json_decode as _decode, json_encode as _encode


def _event(kind: object, data: dict[str, Any]) -> SseEvent:
    head = b"event: " + str(kind).encode() + b"\n" if isinstance(kind, str) else b""
    return SseEvent(head + b"data: " + _encode(data) + b"\n\n")


class NativeEdit:
    """A ``StreamTextEdit`` applied to a native dialect answer (module docstring)."""

    __slots__ = ("editor", "_pending", "_last")

    def __init__(self, editor: StreamTextEdit) -> None:
        self.editor = editor
        self._pending: dict[tuple[Any, ...], str] = {}           # slot -> text held back
        self._last: dict[tuple[Any, ...], dict[str, Any]] = {}   # slot -> its last delta event

    # -- whole answers ------------------------------------------------------------------
    def whole(self, body: bytes) -> bytes:
        editor = self.editor
        if editor.WHOLE_BYTES:
            return editor.whole(body)
        try:
            answer = _decode(body)
        except msgspec.DecodeError:
            return body
        if not isinstance(answer, dict):
            return body
        changed = False
        for container, field in _answer_texts(answer):
            text = container[field]
            edited = editor.edit_text(text, ("whole", field), True)[0]
            if edited != text:
                container[field] = edited
                changed = True
        return _encode(answer) if changed else body

    # -- streams ------------------------------------------------------------------------
    def events(self, events: list[SseEvent]) -> list[SseEvent]:
        out: list[SseEvent] = []
        editor = self.editor
        for event in events:
            data = _data(event)
            found = native.text_delta(data) if data is not None else None
            if found is None or (found[2] and not editor.TOOL_ARGUMENTS):
                out += self._flush()
                out.append(self._whole_event(event, data))
                continue
            slot, text, _ = found
            if self._pending and slot not in self._pending:
                out += self._flush()
            assert data is not None
            now, held = editor.edit_text(self._pending.pop(slot, "") + text, slot, False)
            self._last[slot] = data
            if held:
                self._pending[slot] = held
            if now or not held:
                # the event as it came when its text is what goes, else a copy with the text
                out.append(event if now == text else _event(data.get("type"), native.with_text(data, now)))
        return out

    def finish(self) -> list[SseEvent]:
        return self._flush()

    def close(self, tail: bytes) -> bytes:
        return tail

    def _flush(self) -> list[SseEvent]:
        out = []
        for slot, held in self._pending.items():
            now = self.editor.edit_text(held, slot, True)[0]
            if now:
                data = self._last[slot]
                out.append(_event(data.get("type"), native.with_text(data, now)))
        self._pending.clear()
        return out

    def _whole_event(self, event: SseEvent, data: dict[str, Any] | None) -> SseEvent:
        editor = self.editor
        if editor.WHOLE_BYTES:
            raw = editor.whole(event.raw)
            return event if raw is event.raw else SseEvent(raw)
        if data is None:
            return event
        changed = False
        for container, field in native.whole_texts(data):
            text = container[field]
            if field == "arguments" and not editor.TOOL_ARGUMENTS:
                continue
            edited = editor.edit_text(text, ("whole", field), True)[0]
            if edited != text:
                container[field] = edited
                changed = True
        return _event(data.get("type"), data) if changed else event


def _data(event: SseEvent) -> dict[str, Any] | None:
    raw = event.data
    if not raw or raw[:1] != b"{":
        return None
    try:
        data = _decode(raw)
    except msgspec.DecodeError:
        return None
    return data if isinstance(data, dict) else None


def _answer_texts(answer: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """(container, field) of every text of a whole native answer: a Responses ``response``'s
    output items, or a Messages ``message``'s text and thinking blocks."""
    found: list[tuple[dict[str, Any], str]] = []
    for item in answer.get("output") or ():
        if isinstance(item, dict):
            found.extend(native.whole_texts({"type": "response.output_item.done", "item": item}))
    for block in answer.get("content") or ():
        if isinstance(block, dict):
            for field in ("text", "thinking"):
                if isinstance(block.get(field), str):
                    found.append((block, field))
    return found
