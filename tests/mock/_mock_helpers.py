"""Request builders and SSE parsing shared by the mock upstream tests."""

from __future__ import annotations

from typing import Any

import orjson

from tests.support import chat as support_chat


def chat(content: str = "hello there world", **extra: Any) -> dict[str, Any]:
    """tests/support.py's chat with no output bound unless one is given (the mock needs none)."""
    body = support_chat(content=content, **extra)
    if "max_tokens" not in extra:
        del body["max_tokens"]
    return body


def sse_events(text: str) -> list[Any]:
    events = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        assert block.startswith("data: "), block
        payload = block[len("data: ") :]
        events.append(payload if payload == "[DONE]" else orjson.loads(payload))
    return events
