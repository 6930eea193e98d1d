"""Request builders and SSE parsing shared by the mock upstream tests."""

from __future__ import annotations

from typing import Any

import orjson


def chat(content: str = "hello there world", **extra: Any) -> dict[str, Any]:
    return {"model": "small-chat", "messages": [{"role": "user", "content": content}], **extra}


def sse_events(text: str) -> list[Any]:
    events = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        assert block.startswith("data: "), block
        payload = block[len("data: ") :]
        events.append(payload if payload == "[DONE]" else orjson.loads(payload))
    return events
