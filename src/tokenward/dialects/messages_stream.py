"""A chat-completions stream as Anthropic Messages events, sans-IO.

``MessagesStream.feed(chunk)`` takes each chat chunk (a dict, the data bytes, or the
project's typed ``wire.chunks.Chunk``) and returns the bytes of the events it makes:
``message_start`` (with the input tokens the gateway counted, since a chat stream reports
usage only at its end) and ``ping`` first, then per content block ``content_block_start``,
``content_block_delta`` (``text_delta`` or ``input_json_delta``), ``content_block_stop``.
``finish()`` closes the open block and writes ``message_delta`` (stop reason, usage) and
``message_stop``; ``error(...)`` writes the in-band ``error`` event.

Blocks are sequential, as Anthropic sends them: a text block closes when a tool call
starts, a tool call's block when the next one starts. Chat backends stream tool calls one
after another; should one interleave argument fragments of two calls, a fragment for an
already closed block is still sent with that block's index (the SDK's accumulator adds it
to the right block), the one place the order departs from Anthropic's.
"""

from __future__ import annotations

from typing import Any

from ..wire.chunks import Chunk
from .chat_answer import StreamChoice, as_chunk
from .common import encode, new_id, sse
from .envelopes import anthropic_error_type
from .messages_schema import Parsed
from .messages_translate import stop_of, usage_object


class MessagesStream:
    """One chat stream's translation; feed chunks in order, then ``finish()`` once."""

    def __init__(self, parsed: Parsed, *, message_id: str | None = None, input_tokens: int = 0) -> None:
        self._parsed = parsed
        self._id = message_id or new_id("msg")
        self._input_tokens = input_tokens
        self._started = False
        self._ended = False
        self._blocks = 0                  # blocks started so far (the next block's index)
        self._open: int | None = None     # the index of the open block
        self._open_kind = ""
        self._calls: dict[int, int] = {}  # chat tool-call index -> block index
        self._finish_reason: str | None = None
        self._stop_reason: object = None
        self._usage: object = None

    def start(self) -> bytes:
        """``message_start`` and a ``ping`` (once; ``feed`` calls it)."""
        if self._started:
            return b""
        self._started = True
        message: dict[str, Any] = {
            "id": self._id, "type": "message", "role": "assistant", "model": self._parsed.request.model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": self._input_tokens, "output_tokens": 0}}
        return sse("message_start", {"type": "message_start", "message": message}) + sse("ping", {"type": "ping"})

    def feed(self, chunk: Chunk | dict[str, Any] | bytes) -> bytes:
        out = [b"" if self._started else self.start()]
        typed = as_chunk(chunk)
        if typed is None or self._ended:
            return out[0]
        if typed.usage is not None:
            self._usage = typed.usage
        for choice in typed.choices or ():
            if choice.index != 0:
                continue        # the translated request never asks for n > 1
            delta = choice.delta
            if delta is not None:
                if delta.content:
                    out.append(self._text(delta.content))
                for call in delta.tool_calls or ():
                    out.append(self._call(call))
            if choice.finish_reason is not None:
                self._finish_reason = choice.finish_reason
                self._stop_reason = choice.stop_reason if isinstance(choice, StreamChoice) else None
        return b"".join(out)

    def _open_block(self, kind: str, block: dict[str, Any]) -> bytes:
        out = self._close()
        index = self._blocks
        self._blocks += 1
        self._open, self._open_kind = index, kind
        return out + sse("content_block_start", {"type": "content_block_start", "index": index,
                                                 "content_block": block})

    def _text(self, text: str) -> bytes:
        out = b""
        if self._open is None or self._open_kind != "text":
            out = self._open_block("text", {"type": "text", "text": ""})
        return out + _delta(self._open, {"type": "text_delta", "text": text})

    def _call(self, call: Any) -> bytes:
        out = b""
        index = self._calls.get(call.index)
        function = call.function
        if index is None:
            name = function.name if function is not None and function.name else ""
            out = self._open_block("tool_use", {"type": "tool_use", "id": call.id or new_id("toolu"),
                                                "name": name, "input": {}})
            index = self._calls[call.index] = self._blocks - 1
        if function is not None and function.arguments:
            out += _delta(index, {"type": "input_json_delta", "partial_json": function.arguments})
        return out

    def _close(self) -> bytes:
        if self._open is None:
            return b""
        index, self._open = self._open, None
        return sse("content_block_stop", {"type": "content_block_stop", "index": index})

    @property
    def usage(self) -> object:
        """The chat usage the stream reported (its last usage chunk), None until one came."""
        return self._usage

    def finish(self, usage: dict[str, Any] | None = None) -> bytes:
        """Close the open block, then ``message_delta`` and ``message_stop`` (``usage``: a
        chat usage object replacing the stream's own, e.g. the gateway's count)."""
        if self._ended:
            return b""
        out = self.start() + self._close()
        self._ended = True
        stop_reason, stop_sequence = stop_of(self._parsed, self._finish_reason, self._stop_reason)
        counted = usage_object(usage if usage is not None else self._usage, self._input_tokens)
        return out + sse("message_delta", {"type": "message_delta",
                                           "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
                                           "usage": counted}) + sse("message_stop", {"type": "message_stop"})

    def error(self, code: str, message: str, status: int = 500) -> bytes:
        """Anthropic's in-band error event (the SDK raises it); ends the stream."""
        if self._ended:
            return b""
        self._ended = True
        error = {"type": anthropic_error_type(code, status), "message": message, "code": code}
        return self.start() + sse("error", {"type": "error", "error": error})


_DELTA = b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,"delta":{"type":'
_TEXT = b'"text_delta","text":'
_JSON = b'"input_json_delta","partial_json":'


def _delta(index: int | None, delta: dict[str, Any]) -> bytes:
    """A ``content_block_delta`` event (its bytes built directly: one per streamed chunk)."""
    kind = delta["type"]
    if index is not None and kind in ("text_delta", "input_json_delta"):
        head, value = (_TEXT, delta["text"]) if kind == "text_delta" else (_JSON, delta["partial_json"])
        return _DELTA % index + head + encode(value) + b"}}\n\n"
    return sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
