"""Editing the text of an answer as it streams: the shared part of the response transforms
that change what the model wrote (``Restorer`` puts this request's values back,
``OutputRedactor`` masks personal data the model produced itself).

A subclass says, per text field of a choice, what to send now and what to hold back
(``_split``); this class finds those fields in each chunk, carries what was held back in
front of the same field's next text, and flushes it with the choice's ``finish_reason``
or at the end of the stream (``finish``). An event none of whose texts the subclass needs
to see (``_touches``) passes as it is, bytes unchanged.
"""

from __future__ import annotations

from typing import Any

from ..wire.chunks import parsed, texts
from ..wire.sse import SseEvent
from ..wire.codec import json_decode as _decode, json_encode as _encode


# the text fields of a streamed choice's delta
DELTA_FIELDS = ("content", "reasoning_content", "refusal")

# Where a text streams, as the editor keeps its state per place: any tuple its caller picks
# (here a choice's (index, field); dialects/native_edit.py its own slots).
Slot = tuple[object, ...]
# A chat choice's text field: a delta's field name, or ("tool", the tool call's index)
Field = str | tuple[str, int]


class StreamTextEdit:
    """Per-field hold-back and edit of a stream's text (see the module docstring)."""

    __slots__ = ("_pending", "_shape")
    TOOL_ARGUMENTS = True     # edit tool-call arguments too
    # ``whole`` edits any JSON document at the byte level (an answer in another API too)
    WHOLE_BYTES = False

    def __init__(self) -> None:
        self._pending: dict[tuple[int, Field], str] = {}   # (choice index, field) -> text held back
        self._shape: dict[str, Any] | None = None  # id/object/model of the stream, for finish()

    # -- what a subclass says ---------------------------------------------------------------
    def whole(self, body: bytes) -> bytes:
        """A complete answer (pipeline/outbound.py ``ResponseTransform``)."""
        raise NotImplementedError

    def _touches(self, text: str) -> bool:
        """Whether an event carrying this text must be decoded and edited."""
        raise NotImplementedError

    def _split(self, text: str, key: Slot, finishing: bool) -> tuple[str, str]:
        """(the edited text to send now, the raw tail to hold back); nothing is held back
        when ``finishing``."""
        raise NotImplementedError

    def edit_text(self, text: str, key: Slot, finishing: bool) -> tuple[str, str]:
        """One field's text as it streams: (what to send now, what to hold back), kept per
        ``key``; for an editor of another API's events (dialects/native_edit.py)."""
        return self._split(text, key, finishing)

    def _unreadable(self, event: SseEvent) -> SseEvent:
        """An event that is not a chunk this class can read."""
        return event

    # -- streams ------------------------------------------------------------------------------
    def events(self, events: list[SseEvent]) -> list[SseEvent]:
        out = []
        touches = self._touches
        for event in events:
            typed = parsed(event)   # decoded once, shared with the usage counter
            if typed is None:
                out.append(self._unreadable(event))
                continue
            if not self._pending and not any(touches(text) for text in texts(typed)):
                out.append(event)   # the common case: nothing to edit, nothing held
                continue
            chunk = _decode(event.data) if event.data is not None else None   # (parsed: it has data)
            if not isinstance(chunk, dict) or not isinstance(chunk.get("choices"), list):
                out.append(event)
                continue
            self._edit(chunk)
            out.append(SseEvent(b"data: " + _encode(chunk) + b"\n\n"))
        return out

    def close(self, tail: bytes) -> bytes:
        """The stream's last bytes pass as they are (pipeline/outbound.py ``ResponseTransform``)."""
        return tail

    def finish(self) -> list[SseEvent]:
        """Text still held back when the stream ended without a finish_reason for it."""
        if not self._pending:
            return []
        shape = self._shape or {}
        chat = shape.get("object", "chat.completion.chunk") != "text_completion"
        choices: dict[int, dict[str, Any]] = {}
        for (index, key), text in list(self._pending.items()):
            text = self._split(text, (index, key), True)[0]
            choice = choices.setdefault(index, {"index": index, "finish_reason": None})
            if not chat:
                choice["text"] = choice.get("text", "") + text
                continue
            put(choice.setdefault("delta", {}), key, text)
        self._pending.clear()
        chunk = {**shape, "choices": list(choices.values())}
        return [SseEvent(b"data: " + _encode(chunk) + b"\n\n")]

    def _edit(self, chunk: dict[str, Any]) -> None:
        if self._shape is None:
            self._shape = {k: chunk[k] for k in ("id", "object", "created", "model") if k in chunk}
        for choice in chunk["choices"]:
            if not isinstance(choice, dict):
                continue
            index = choice.get("index", 0)
            finishing = choice.get("finish_reason") is not None
            delta = choice.get("delta")
            if isinstance(delta, dict):
                for name in DELTA_FIELDS:
                    self._field(delta, name, (index, name), finishing)
                calls = delta.get("tool_calls")
                if self.TOOL_ARGUMENTS and isinstance(calls, list):
                    for call in calls:
                        fn = call.get("function") if isinstance(call, dict) else None
                        if isinstance(fn, dict):
                            self._field(fn, "arguments", (index, ("tool", call.get("index", 0))), finishing)
                if finishing:
                    for (i, field), text in list(self._pending.items()):
                        if i == index:
                            del self._pending[(i, field)]
                            put(delta, field, self._split(text, (i, field), True)[0])
            elif "text" in choice:
                self._field(choice, "text", (index, "text"), finishing)

    def _field(self, holder: dict[str, Any], key: str, pending_key: tuple[int, Field], finishing: bool) -> None:
        value = holder.get(key)
        if not isinstance(value, str):
            return
        value = self._pending.pop(pending_key, "") + value
        now, held = self._split(value, pending_key, finishing)
        if held:
            self._pending[pending_key] = held
        holder[key] = now


def put(delta: dict[str, Any], key: Field, text: str) -> None:
    """Put held-back text into a delta at ``key`` (a text field, or ("tool", i))."""
    if isinstance(key, tuple):
        calls = delta.setdefault("tool_calls", [])
        for call in calls:
            if call.get("index", 0) == key[1]:
                fn = call.setdefault("function", {})
                fn["arguments"] = text + (fn.get("arguments") or "")
                return
        calls.append({"index": key[1], "function": {"arguments": text}})
        return
    delta[key] = text + (delta.get(key) or "")
