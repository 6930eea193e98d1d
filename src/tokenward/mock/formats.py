"""OpenAI wire formats produced by the mock: bodies, SSE chunks, usage, errors.

Everything a stream repeats (the per-token chunk) is encoded once per request, so a
token costs one ``send`` of prepared bytes.
"""

from __future__ import annotations

import base64
import math
import struct
import zlib
from dataclasses import dataclass
from typing import Any

import msgspec

from .steering import BadRequest, Steering, output_tokens

TOKEN_TEXT = "tok "
DONE = b"data: [DONE]\n\n"
DEFAULT_MODELS = ("small-chat", "large-chat", "mock-model")
EMBEDDING_DIM = 8

encode = msgspec.json.encode
_decoder = msgspec.json.Decoder()


def decode_body(raw: bytes) -> dict[str, Any]:
    try:
        body = _decoder.decode(raw)
    except msgspec.DecodeError as exc:
        raise BadRequest(f"invalid JSON body: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    return body


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}
_ERROR_CODES = {429: "rate_limit_exceeded", 500: "server_error", 503: "service_unavailable"}


def error_body(status: int, message: str, code: str | None = None) -> bytes:
    kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return encode(
        {
            "error": {
                "message": message,
                "type": kind,
                "param": None,
                "code": code or _ERROR_CODES.get(status, f"mock_status_{status}"),
            }
        }
    )


def models_body(models: tuple[str, ...], created: int) -> bytes:
    data = [{"id": m, "object": "model", "created": created, "owned_by": "mock"} for m in models]
    return encode({"object": "list", "data": data})


@dataclass(slots=True)
class Plan:
    """What one chat/completions request will produce."""

    chat: bool
    model: str
    choices: int
    tokens: int
    finish: str
    prompt_tokens: int
    include_usage: bool

    def usage(self) -> dict[str, int]:
        out = self.tokens * self.choices
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": out,
            "total_tokens": self.prompt_tokens + out,
        }


def _model(body: dict[str, Any]) -> str:
    model = body.get("model", "mock-model")
    if not isinstance(model, str):
        raise BadRequest("model: expected a string")
    return model


def build_plan(chat: bool, body: dict[str, Any], steer: Steering) -> Plan:
    n = body.get("n")
    if n is None:
        n = 1
    elif type(n) is not int or n < 1:
        raise BadRequest("n: expected an integer >= 1")
    if chat:
        prompt_tokens, items = chat_prompt_tokens(body.get("messages")), 1
    else:
        counts = item_tokens(body.get("prompt", ""), "prompt")
        prompt_tokens, items = sum(counts), len(counts)
    tokens, capped = output_tokens(steer, body)
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
    return Plan(
        chat=chat,
        model=_model(body),
        choices=items * n,
        tokens=tokens,
        finish="length" if capped else "stop",
        prompt_tokens=prompt_tokens,
        include_usage=include_usage and not steer.no_usage,
    )


def _words(content: Any) -> int:
    if content is None:
        return 0
    if isinstance(content, str):
        return len(content.split())
    if isinstance(content, list):
        total = 0
        for part in content:
            if not isinstance(part, dict):
                raise BadRequest("messages[].content[]: expected an object")
            text = part.get("text")
            if part.get("type") == "text" and isinstance(text, str):
                total += len(text.split())
        return total
    raise BadRequest("messages[].content: expected a string or an array of parts")


def chat_prompt_tokens(messages: Any) -> int:
    """A deterministic stand-in for a tokenizer: words plus 4 per message."""
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages: expected a non-empty array")
    total = 0
    for message in messages:
        if not isinstance(message, dict):
            raise BadRequest("messages[]: expected an object")
        total += _words(message.get("content")) + 4
    return total


def _is_ids(value: Any) -> bool:
    return isinstance(value, list) and all(type(t) is int for t in value)


def item_tokens(value: Any, field: str) -> list[int]:
    """Token count of each item of a prompt / embeddings input (str, ids, or lists)."""
    if isinstance(value, str):
        return [len(value.split())]
    if isinstance(value, list) and value:
        if _is_ids(value):
            return [len(value)]
        counts = []
        for item in value:
            if isinstance(item, str):
                counts.append(len(item.split()))
            elif _is_ids(item):
                counts.append(len(item))
            else:
                raise BadRequest(f"{field}[]: expected a string or an array of token ids")
        return counts
    raise BadRequest(f"{field}: expected a string or a non-empty array")


class StreamFormat:
    """The SSE byte strings of one streamed response."""

    __slots__ = ("role", "step", "finish", "usage")

    def __init__(self, plan: Plan, rid: str, created: int) -> None:
        obj = "chat.completion.chunk" if plan.chat else "text_completion"
        base = {"id": rid, "object": obj, "created": created, "model": plan.model}
        indices = range(plan.choices)

        def sse(choice: dict[str, Any]) -> bytes:
            return b"data: " + encode({**base, "choices": [choice]}) + b"\n\n"

        if plan.chat:
            self.role = b"".join(sse(_delta(i, {"role": "assistant", "content": ""}, None)) for i in indices)
            self.step = b"".join(sse(_delta(i, {"content": TOKEN_TEXT}, None)) for i in indices)
            self.finish = b"".join(sse(_delta(i, {}, plan.finish)) for i in indices)
        else:
            self.role = b""
            self.step = b"".join(sse(_text(i, TOKEN_TEXT, None)) for i in indices)
            self.finish = b"".join(sse(_text(i, "", plan.finish)) for i in indices)
        self.usage = b""
        if plan.include_usage:
            self.usage = b"data: " + encode({**base, "choices": [], "usage": plan.usage()}) + b"\n\n"


def _delta(index: int, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}


def _text(index: int, text: str, finish: str | None) -> dict[str, Any]:
    return {"index": index, "text": text, "logprobs": None, "finish_reason": finish}


def full_body(plan: Plan, rid: str, created: int) -> bytes:
    text = TOKEN_TEXT * plan.tokens
    if plan.chat:
        message = {"role": "assistant", "content": text}
        choices = [
            {"index": i, "message": message, "logprobs": None, "finish_reason": plan.finish}
            for i in range(plan.choices)
        ]
        obj = "chat.completion"
    else:
        choices = [_text(i, text, plan.finish) for i in range(plan.choices)]
        obj = "text_completion"
    return encode(
        {"id": rid, "object": obj, "created": created, "model": plan.model, "choices": choices, "usage": plan.usage()}
    )


def _vector(item: Any) -> list[float]:
    seed = zlib.crc32(item.encode() if isinstance(item, str) else encode(item))
    return [round(math.sin(seed + i), 6) for i in range(EMBEDDING_DIM)]


def embeddings_body(body: dict[str, Any]) -> bytes:
    raw: Any = body.get("input")   # a string, token ids or a list of either (item_tokens checks)
    counts = item_tokens(raw, "input")
    items = [raw] if isinstance(raw, str) or _is_ids(raw) else raw
    as_base64 = body.get("encoding_format") == "base64"
    data = []
    for i, item in enumerate(items):
        vec: Any = _vector(item)
        if as_base64:
            # The openai SDK asks for base64 by default: little-endian float32.
            vec = base64.b64encode(struct.pack(f"<{EMBEDDING_DIM}f", *vec)).decode()
        data.append({"object": "embedding", "index": i, "embedding": vec})
    tokens = sum(counts)
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return encode({"object": "list", "data": data, "model": _model(body), "usage": usage})
