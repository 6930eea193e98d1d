"""Prompt tokens of a validated request, per outer item, with one model's counter.

Chat: every message costs the counter's per-message overhead, its role, its text parts
(image / audio / file parts are surcharges, counted by validation), its name, tool
calls and tool-call ids; tool definitions, a ``json_schema`` response format and
vLLM documents / chat templates are counted as the JSON text a template renders; plus
the reply priming. Completions and embeddings: one count per outer item (token-id items
count exactly), the completion ``suffix`` added to each, and vLLM ``prompt_embeds``
entries by their validated upper bound.
"""

from __future__ import annotations

from typing import Any, Callable

from msgspec import UNSET

from ..validation.result import NormalizedRequest
from ..validation.schemas import (
    AssistantMessage,
    DeveloperMessage,
    JsonSchemaFormat,
    RefusalPart,
    SystemMessage,
    TextPart,
    ToolMessage,
    UserMessage,
)
from .counters import Counter

_ROLES: dict[type, str] = {SystemMessage: "system", DeveloperMessage: "developer", UserMessage: "user",
          AssistantMessage: "assistant", ToolMessage: "tool"}
# JSON punctuation around a tool definition or a tool call, beyond the counted strings.
_TOOL_FRAME = 8


def _message_costs(counter: Counter) -> dict[type, int]:
    """Overhead + role tokens per message class, computed once per counter."""
    costs = counter.__dict__.get("_message_costs")
    if costs is None:
        costs = {cls: counter.message_overhead + counter.count(role) for cls, role in _ROLES.items()}
        counter._message_costs = costs
    return costs


def _content_tokens(content: Any, count: Callable[[str], int]) -> int:
    if type(content) is str:
        return count(content)
    if not content:
        return 0
    total = 0
    for part in content:
        kind = type(part)
        if kind is TextPart:
            total += count(part.text)
        elif kind is RefusalPart:
            total += count(part.refusal)
    return total


def _assistant_extras(message: AssistantMessage, count: Callable[[str], int]) -> int:
    total = 0
    if isinstance(message.refusal, str):
        total += count(message.refusal)
    calls = message.tool_calls
    if calls:
        for call in calls:
            total += _TOOL_FRAME + count(call.id) + count(call.function.name) + count(call.function.arguments)
    if message.function_call:
        total += _TOOL_FRAME + count(message.function_call.name) + count(message.function_call.arguments)
    return total


def chat_tokens(req: Any, counter: Counter) -> int:
    count = counter.count
    costs = _message_costs(counter)
    total = counter.reply_overhead
    for message in req.messages:
        kind = type(message)
        total += costs[kind] + _content_tokens(message.content, count)
        if kind is not ToolMessage and message.name is not UNSET:
            total += counter.name_overhead + count(message.name)
        if kind is AssistantMessage:
            total += _assistant_extras(message, count)
        elif kind is ToolMessage:
            total += count(message.tool_call_id)
    tools = req.tools
    if tools:
        for tool in tools:
            fn = tool.function
            total += _TOOL_FRAME + count(fn.name)
            if fn.description is not UNSET:
                total += count(fn.description)
            if fn.parameters is not UNSET:
                total += counter.count_raw(bytes(fn.parameters))
    fmt = req.response_format
    if isinstance(fmt, JsonSchemaFormat) and fmt.json_schema.schema is not UNSET:
        total += counter.count_raw(bytes(fmt.json_schema.schema))
    return total


def item_tokens(value: Any, counter: Counter) -> list[int]:
    """Tokens of each outer item of a prompt / embedding input (validated shape)."""
    if value is UNSET:
        return []
    if type(value) is str:
        return [counter.count(value)]
    first = value[0]
    if type(first) is int:
        return [len(value)]
    if type(first) is str:
        count = counter.count
        return [count(text) for text in value]
    return [len(ids) for ids in value]


def prompt_tokens(request: NormalizedRequest, counter: Counter) -> list[int]:
    """Input tokens per outer item (a chat request is one item)."""
    body = request.body
    if request.route == "chat":
        total = chat_tokens(body, counter)
        for raw in request.extra_raw:
            total += counter.count_raw(raw)
        return [total]
    if request.route == "embeddings":
        return item_tokens(body.input, counter)
    items = item_tokens(body.prompt, counter)
    suffix = body.suffix
    if isinstance(suffix, str) and suffix:
        extra = counter.count(suffix)
        items = [tokens + extra for tokens in items]
    return items + list(request.embed_tokens)
