"""The mock's echo answers (``x-mock-echo: N``): the answer is the request's own last text.

For tests of what happens to text on its way back: the answer is the last user message's
text (chat) or the prompt (completions), exactly as the backend received it, in every
choice; streamed N characters per chunk (1: a chunk per character, so a placeholder
arrives split across chunks). ``x-mock-tool-call: NAME`` answers with a call of tool NAME
whose arguments are ``{"echo": <that text>}`` (or ``x-mock-tool-args``) instead, streamed in pieces the same way.
With ``x-mock-die-after: K`` a streamed echo drops the connection after its first K events.
"""

from __future__ import annotations

from typing import Any

from .formats import Plan, encode


def echo_text(chat: bool, body: dict[str, Any]) -> str:
    if not chat:
        prompt = body.get("prompt", "")
        return prompt if isinstance(prompt, str) else " ".join(p for p in prompt if isinstance(p, str))
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def _pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def _usage(plan: Plan, pieces: int) -> dict[str, int]:
    out = pieces * plan.choices
    return {"prompt_tokens": plan.prompt_tokens, "completion_tokens": out, "total_tokens": plan.prompt_tokens + out}


def full_body(plan: Plan, text: str, size: int, tool: str | None, rid: str, created: int,
              args: str = "") -> bytes:
    pieces = len(_pieces(args if tool else text, size))
    if plan.chat:
        if tool:
            call = {"id": "call_0", "type": "function",
                    "function": {"name": tool, "arguments": args}}
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
        else:
            message = {"role": "assistant", "content": text}
        choices = [{"index": i, "message": message, "logprobs": None,
                    "finish_reason": "tool_calls" if tool else "stop"} for i in range(plan.choices)]
        kind = "chat.completion"
    else:
        choices = [{"index": i, "text": text, "logprobs": None, "finish_reason": "stop"} for i in range(plan.choices)]
        kind = "text_completion"
    return encode({"id": rid, "object": kind, "created": created, "model": plan.model, "choices": choices,
                   "usage": _usage(plan, pieces)})


def stream_events(plan: Plan, text: str, size: int, tool: str | None, rid: str, created: int,
                  args: str = "") -> list[bytes]:
    kind = "chat.completion.chunk" if plan.chat else "text_completion"
    base = {"id": rid, "object": kind, "created": created, "model": plan.model}

    def event(choice: dict[str, Any]) -> bytes:
        return b"data: " + encode({**base, "choices": [choice]}) + b"\n\n"

    out = []
    source = args if tool else text
    pieces = _pieces(source, size)
    for i in range(plan.choices):
        if plan.chat:
            first: dict[str, Any] = {"role": "assistant", "content": None if tool else ""}
            if tool:
                first["tool_calls"] = [{"index": 0, "id": "call_0", "type": "function",
                                        "function": {"name": tool, "arguments": ""}}]
            out.append(event({"index": i, "delta": first, "finish_reason": None}))
    for piece in pieces:
        for i in range(plan.choices):
            if not plan.chat:
                out.append(event({"index": i, "text": piece, "finish_reason": None}))
            elif tool:
                out.append(event({"index": i, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]},
                                  "finish_reason": None}))
            else:
                out.append(event({"index": i, "delta": {"content": piece}, "finish_reason": None}))
    for i in range(plan.choices):
        finish = "tool_calls" if tool else "stop"
        out.append(event({"index": i, "delta": {}, "finish_reason": finish} if plan.chat
                         else {"index": i, "text": "", "finish_reason": finish}))
    if plan.include_usage:
        out.append(b"data: " + encode({**base, "choices": [], "usage": _usage(plan, len(pieces))}) + b"\n\n")
    out.append(b"data: [DONE]\n\n")
    return out
