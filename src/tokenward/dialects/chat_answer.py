"""The typed, lenient view of a whole chat-completion answer both dialects translate back.

Only the fields the translations read are typed; anything else in the answer is ignored.
"""

from __future__ import annotations

from typing import Any, Union

import msgspec

from ..errors import Reason, Refusal
from ..wire import chunks


class Function(msgspec.Struct):
    name: str = ""
    arguments: str = ""


class ToolCall(msgspec.Struct):
    function: Function
    id: str = ""


class Message(msgspec.Struct):
    content: Union[str, None] = None
    refusal: Union[str, None] = None
    tool_calls: Union[list[ToolCall], None] = None


class Choice(msgspec.Struct):
    message: Message
    finish_reason: Union[str, None] = None
    # vLLM: the stop string (or token id) that ended the choice, when one did
    stop_reason: Union[str, int, None] = None


class Completion(msgspec.Struct):
    choices: list[Choice]
    id: str = ""
    created: int = 0
    model: str = ""
    usage: Union[dict[str, Any], None] = None


_decode = msgspec.json.Decoder(Completion).decode


def read(body: Union[bytes, dict[str, Any]]) -> Completion:
    """A chat completion (bytes or decoded), with exactly one choice (no ``n`` here)."""
    try:
        answer = msgspec.convert(body, Completion) if isinstance(body, dict) else _decode(body)
    except (msgspec.ValidationError, msgspec.DecodeError):
        raise Refusal(Reason.upstream_error, "the upstream's answer could not be read") from None
    if len(answer.choices) != 1:
        raise Refusal(Reason.upstream_error, "the upstream answered with other than one choice")
    return answer


def usage_counts(usage: object) -> tuple[int, int, int, int] | None:
    """(prompt, completion, cached prompt, reasoning) tokens from a chat ``usage`` object."""
    if not isinstance(usage, dict):
        return None
    prompt, completion = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
    if prompt is None or completion is None:
        return None
    cached = _count(_detail(usage, "prompt_tokens_details", "cached_tokens"))
    reasoning = _count(_detail(usage, "completion_tokens_details", "reasoning_tokens"))
    return prompt, completion, cached or 0, reasoning or 0


def _detail(usage: dict[str, Any], group: str, name: str) -> object:
    details = usage.get(group)
    return details.get(name) if isinstance(details, dict) else None


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class StreamChoice(msgspec.Struct):
    """A streamed choice as ``wire.chunks.Choice`` reads it, with vLLM's ``stop_reason``
    (the stop string that ended it)."""

    index: int = 0
    delta: Union[chunks.Delta, None] = None
    finish_reason: Union[str, None] = None
    stop_reason: Union[str, int, None] = None


class StreamChunk(msgspec.Struct):
    """The fields of a chat chunk the dialect streams read (``wire.chunks.Chunk`` has them too)."""

    model: Union[str, None] = None
    choices: Union[list[StreamChoice], None] = None
    usage: Union[dict[str, Any], None] = None


_decode_chunk = msgspec.json.Decoder(StreamChunk).decode


def as_chunk(chunk: object) -> chunks.Chunk | StreamChunk | None:
    """A chat chunk from a dict, its SSE data bytes, or already typed (None: unreadable)."""
    if isinstance(chunk, chunks.Chunk):
        return chunk
    try:
        if isinstance(chunk, (bytes, bytearray, memoryview)):
            return _decode_chunk(chunk)
        return msgspec.convert(chunk, StreamChunk)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
