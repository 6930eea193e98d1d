"""The typed view of one OpenAI streaming chunk: the one decoder of a streamed event.

Decoded once per event, when a reader first needs it, and kept on the event
(``SseEvent.parsed``): the usage counter (reconcile/stream_usage.py) and the personal-data
restorer (pii/placeholders.py) both read it, and neither decodes the event again. Only
the fields they read are typed; the rest of the chunk is ignored, and an event whose
fields have unexpected types reads as ``None`` (the readers then fall back to the bytes).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import msgspec


class Function(msgspec.Struct):
    name: str | None = None
    arguments: str | None = None


class ToolCall(msgspec.Struct):
    index: int = 0
    id: str | None = None
    type: str | None = None
    function: Function | None = None


class Delta(msgspec.Struct):
    role: str | None = None
    content: str | None = None
    reasoning_content: str | None = None
    refusal: str | None = None
    tool_calls: list[ToolCall] | None = None


class Choice(msgspec.Struct):
    index: int = 0
    delta: Delta | None = None
    text: str | None = None
    finish_reason: str | None = None


class Chunk(msgspec.Struct):
    id: str | None = None
    kind: str | None = msgspec.field(default=None, name="object")
    created: int | None = None
    model: str | None = None
    choices: list[Choice] | None = None
    usage: dict[str, object] | None = None
    error: object = None


_decode = msgspec.json.Decoder(Chunk).decode
_UNREADABLE = Chunk()   # marks an event already tried and found not to be a readable chunk


class Event(Protocol):
    """A streamed event as this module reads it: ``wire/sse.py``'s ``SseEvent``, which keeps
    its chunk once decoded."""

    data: bytes | None
    parsed: Chunk | None


def parsed(event: Event) -> Chunk | None:
    """The event's chunk, decoded at the first call (None: no data, [DONE], or unreadable)."""
    chunk = event.parsed
    if chunk is None:
        data = event.data
        chunk = _UNREADABLE
        if data is not None and data != b"[DONE]":
            try:
                chunk = _decode(data)
            except (msgspec.DecodeError, msgspec.ValidationError):
                pass
        event.parsed = chunk
    return None if chunk is _UNREADABLE else chunk


def texts(chunk: Chunk) -> Iterator[str]:
    """Every output text field of a chunk, for a quick look (a brace, say)."""
    for choice in chunk.choices or ():
        if choice.text is not None:
            yield choice.text
        delta = choice.delta
        if delta is not None:
            for value in (delta.content, delta.reasoning_content, delta.refusal):
                if value is not None:
                    yield value
            for call in delta.tool_calls or ():
                if call.function is not None and call.function.arguments is not None:
                    yield call.function.arguments
