"""Chat-completion chunks as a backend streams them, for the dialect stream tests."""

from __future__ import annotations

import json
from typing import Any


def text_chunks(pieces: list[str]) -> list[dict[str, Any]]:
    first = [{"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "small-chat",
              "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
    return first + [{"choices": [{"index": 0, "delta": {"content": piece}}]} for piece in pieces]


def call_chunks(index: int, call_id: str, name: str, fragments: list[str]) -> list[dict[str, Any]]:
    """One tool call: its id and name first (with the first fragment), then the rest."""
    head = fragments[0] if fragments else ""
    out = [{"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": head}}]}}]}]
    out += [{"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": index, "function": {"arguments": fragment}}]}}]} for fragment in fragments[1:]]
    return out


def end_chunks(finish_reason: str, prompt: int, completion: int, **choice: Any) -> list[dict[str, Any]]:
    return [{"choices": [{"index": 0, "delta": {}, "finish_reason": finish_reason, **choice}]},
            {"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                      "total_tokens": prompt + completion}}]


def events(sse: bytes) -> list[tuple[str, dict[str, Any]]]:
    """(event name, decoded data) of each event in a dialect stream."""
    out = []
    for block in sse.decode().split("\n\n"):
        if not block:
            continue
        name, data = block.split("\n", 1)
        assert name.startswith("event: ") and data.startswith("data: "), block
        out.append((name[7:], json.loads(data[6:])))
    return out
