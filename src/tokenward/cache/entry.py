"""A cached answer: the masked answer and its usage, replayable whole or as a stream.

An entry is built from a complete answer, whichever way it came (a JSON body, or a
stream's chunks put back together), and replayed whichever way the next request asks:
a streamed request can be served from an entry a whole answer made, and the other way
round. What is stored is the answer as the backend gave it to this tenant's masked
request: placeholders, not personal data (the PII restorer of the request being served
turns them into that caller's own values on the way out).
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

from ..wire.chunks import Chunk
from ..wire.sse import SseEvent
from ..wire.codec import json_encode as _encode


class CachedChoice(msgspec.Struct, omit_defaults=True):
    index: int
    finish_reason: str | None = None
    content: str | None = None            # a chat message's content, or a completion's text
    refusal: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None  # [{"id", "type", "function": {"name", "arguments"}}]


class CacheEntry(msgspec.Struct, omit_defaults=True):
    chat: bool
    model: str
    choices: list[CachedChoice]
    usage: dict[str, Any] | None = None
    max_tokens: int | None = None          # what the request that made it asked for

    def serves(self, max_tokens: int | None) -> bool:
        """An answer made under a limit serves that limit, or a larger one if every choice
        stopped by itself (it would not have been any longer)."""
        if max_tokens == self.max_tokens:
            return True
        natural = all(c.finish_reason in ("stop", "tool_calls") for c in self.choices)
        return natural and self.max_tokens is not None and max_tokens is not None and self.max_tokens <= max_tokens

    @property
    def tokens(self) -> int:
        return self.count("prompt_tokens") + self.count("completion_tokens")

    def count(self, field: str) -> int:
        """One of the backend's usage counts, 0 unless a whole number >= 0 (a lying backend's
        negative or non-numeric count must not make a saved-tokens counter go back)."""
        value = (self.usage or {}).get(field)
        return value if type(value) is int and value > 0 else 0

    # -- replay ---------------------------------------------------------------------------
    def body(self, request_id: str) -> bytes:
        now = int(time.time())
        if self.chat:
            choices = [{"index": c.index, "message": _message(c), "logprobs": None, "finish_reason": c.finish_reason}
                       for c in self.choices]
            kind, rid = "chat.completion", f"chatcmpl-{request_id}"
        else:
            choices = [{"index": c.index, "text": c.content or "", "logprobs": None, "finish_reason": c.finish_reason}
                       for c in self.choices]
            kind, rid = "text_completion", f"cmpl-{request_id}"
        return _encode({"id": rid, "object": kind, "created": now, "model": self.model, "choices": choices,
                        "usage": self.usage})

    def events(self, request_id: str, include_usage: bool) -> list[SseEvent]:
        now = int(time.time())
        kind = "chat.completion.chunk" if self.chat else "text_completion"
        base = {"id": f"{'chatcmpl' if self.chat else 'cmpl'}-{request_id}", "object": kind, "created": now,
                "model": self.model}

        def event(choice: dict[str, Any]) -> SseEvent:
            return SseEvent(b"data: " + _encode({**base, "choices": [choice]}) + b"\n\n")

        out = []
        for c in self.choices:
            if self.chat:
                out.append(event({"index": c.index, "delta": {"role": "assistant", "content": ""},
                                  "finish_reason": None}))
                delta: dict[str, object] = {k: v for k, v in (("content", c.content), ("refusal", c.refusal),
                                           ("reasoning_content", c.reasoning_content)) if v}
                if c.tool_calls:
                    delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(c.tool_calls)]
                if delta:
                    out.append(event({"index": c.index, "delta": delta, "finish_reason": None}))
                out.append(event({"index": c.index, "delta": {}, "finish_reason": c.finish_reason}))
            else:
                out.append(event({"index": c.index, "text": c.content or "", "finish_reason": None}))
                out.append(event({"index": c.index, "text": "", "finish_reason": c.finish_reason}))
        if include_usage and self.usage:
            out.append(SseEvent(b"data: " + _encode({**base, "choices": [], "usage": self.usage}) + b"\n\n"))
        return out


def _message(choice: CachedChoice) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": choice.content}
    if choice.refusal is not None:
        message["refusal"] = choice.refusal
    if choice.reasoning_content is not None:
        message["reasoning_content"] = choice.reasoning_content
    if choice.tool_calls:
        message["tool_calls"] = choice.tool_calls
    return message


def from_body(body: bytes, max_tokens: int | None) -> CacheEntry | None:
    """An entry from a whole JSON answer; None if it is not one we can replay faithfully
    (log probabilities, an unknown shape)."""
    try:
        obj = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("choices"), list) or not obj["choices"]:
        return None
    chat = obj.get("object") == "chat.completion"
    choices = []
    for raw in obj["choices"]:
        if not isinstance(raw, dict) or raw.get("logprobs") is not None:
            return None
        if chat:
            message = raw.get("message")
            if not isinstance(message, dict):
                return None
            choices.append(CachedChoice(raw.get("index", 0), raw.get("finish_reason"), message.get("content"),
                                        message.get("refusal"), message.get("reasoning_content"),
                                        message.get("tool_calls") or None))
        else:
            choices.append(CachedChoice(raw.get("index", 0), raw.get("finish_reason"), raw.get("text")))
    usage = obj.get("usage") if isinstance(obj.get("usage"), dict) else None
    return CacheEntry(chat, str(obj.get("model", "")), choices, usage, max_tokens)


class StreamAssembly:
    """A streamed answer put back together from its chunks (the typed view, wire/chunks.py)."""

    __slots__ = ("chat", "model", "_choices", "_parts")

    def __init__(self) -> None:
        self.chat = True
        self.model = ""
        self._choices: dict[int, CachedChoice] = {}
        # per choice, the pieces of its content, refusal and reasoning, joined once at the end
        self._parts: dict[int, tuple[list[str], list[str], list[str]]] = {}

    def add(self, chunk: Chunk) -> None:
        # runs for every chunk of every stream that misses: attribute reads, no loops over names
        if not self.model and chunk.model:
            self.model = chunk.model
        if chunk.kind == "text_completion":
            self.chat = False
        for raw in chunk.choices or ():
            index = raw.index
            choice = self._choices.get(index)
            if choice is None:
                choice = self._choices[index] = CachedChoice(index)
                self._parts[index] = ([], [], [])
            content, refusal, reasoning = self._parts[index]
            if raw.finish_reason is not None:
                choice.finish_reason = raw.finish_reason
            if raw.text:
                content.append(raw.text)
            delta = raw.delta
            if delta is None:
                continue
            if delta.content:
                content.append(delta.content)
            if delta.refusal:
                refusal.append(delta.refusal)
            if delta.reasoning_content:
                reasoning.append(delta.reasoning_content)
            if delta.tool_calls:
                for call in delta.tool_calls:
                    self._tool_call(choice, call)

    def _tool_call(self, choice: CachedChoice, call: Any) -> None:
        calls = choice.tool_calls
        if calls is None:
            calls = choice.tool_calls = []
        while len(calls) <= call.index:
            calls.append({"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
        slot = calls[call.index]
        if call.id:
            slot["id"] = call.id
        if call.type:
            slot["type"] = call.type
        fn = call.function
        if fn is not None:
            if fn.name:
                slot["function"]["name"] += fn.name
            if fn.arguments:
                slot["function"]["arguments"] += fn.arguments

    def entry(self, usage: dict[str, Any] | None, max_tokens: int | None) -> CacheEntry | None:
        if not self._choices:
            return None
        for index, (content, refusal, reasoning) in self._parts.items():
            choice = self._choices[index]
            if content:
                choice.content = "".join(content)
            if refusal:
                choice.refusal = "".join(refusal)
            if reasoning:
                choice.reasoning_content = "".join(reasoning)
        choices = [self._choices[i] for i in sorted(self._choices)]
        if self.chat:
            for choice in choices:
                if choice.content is None and not choice.tool_calls:
                    choice.content = ""
        return CacheEntry(self.chat, self.model, choices, usage, max_tokens)
