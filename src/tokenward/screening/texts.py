"""Every caller-controlled string of a validated request, where it sits, and how to change it.

Screening reads all of them, after validation's normalization: message contents and text
parts (tool results included: indirect injection arrives there), names, refusals,
tool-call arguments of earlier turns, tool and response-format descriptions and the JSON
schemas of tools (descriptions inside them), completion prompts and suffixes, embedding
inputs, and the text extracted from attachments. Roles are a closed set validation
already checked, so they carry no caller text.

Each text comes with its path in the request's JSON (``("messages", 2, "content")``).
``replace`` writes new values at paths into the decoded body. Two paths end in a marker:
``JSON`` (a tool's parameter schema, screened as its JSON text: a new text is parsed
back into the schema; placeholders are plain ASCII, so masking keeps it valid JSON) and
``ATTACHMENT`` (the whole part, which masking turns into a text part holding the masked
text extracted from the file).
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET

from ..validation.result import NormalizedRequest
from ..validation.schemas import AssistantMessage, RefusalPart, TextPart, ToolMessage

Path = tuple
ATTACHMENT = "attachment"   # a path's last element: replace the whole part with a text part
JSON = "json"               # a path's last element: the text is JSON, parsed back when replaced


def _content(content: Any, base: Path, found: list) -> None:
    if not content:
        return
    for j, part in enumerate(content):
        kind = type(part)
        if kind is TextPart:
            found.append(((*base, j, "text"), part.text))
        elif kind is RefusalPart:
            found.append(((*base, j, "refusal"), part.refusal))


def _chat(body: Any, found: list) -> None:
    # appends rather than generators: this runs for every screened request
    for i, message in enumerate(body.messages):
        content = message.content
        if type(content) is str:
            found.append((("messages", i, "content"), content))
        else:
            _content(content, ("messages", i, "content"), found)
        name = getattr(message, "name", UNSET)
        if name is not UNSET:
            found.append((("messages", i, "name"), name))
        if type(message) is AssistantMessage:
            if isinstance(message.refusal, str):
                found.append((("messages", i, "refusal"), message.refusal))
            for k, call in enumerate(message.tool_calls or ()):
                found.append((("messages", i, "tool_calls", k, "function", "arguments"), call.function.arguments))
            if message.function_call:
                found.append((("messages", i, "function_call", "arguments"), message.function_call.arguments))
    for k, tool in enumerate(body.tools or ()):
        fn = tool.function
        if fn.description is not UNSET:
            found.append((("tools", k, "function", "description"), fn.description))
        if fn.parameters is not UNSET:
            found.append((("tools", k, "function", "parameters", JSON), bytes(fn.parameters).decode("utf-8", "replace")))
    fmt = body.response_format
    spec = getattr(fmt, "json_schema", None)
    if spec is not None and spec.description is not UNSET:
        found.append((("response_format", "json_schema", "description"), spec.description))


def _items(value: Any, field: str) -> list[tuple[Path | None, str]]:
    if type(value) is str:
        return [((field,), value)]
    if isinstance(value, list) and value and type(value[0]) is str:
        return [((field, i), item) for i, item in enumerate(value)]
    return []


def caller_texts(request: NormalizedRequest) -> tuple[list[str], list[Path | None]]:
    """(texts, paths) of the request, in document order; paths[i] is None where the text
    is screened but has no place in the body (an attachment read from elsewhere)."""
    body = request.body
    if request.route == "chat":
        found: list[tuple[Path | None, str]] = []
        _chat(body, found)
    elif request.route == "completions":
        found = _items(body.prompt, "prompt")
        if isinstance(body.suffix, str):
            found.append((("suffix",), body.suffix))
    else:
        found = _items(body.input, "input")
    for attachment in request.attachments:
        text = getattr(attachment, "text", None)
        if text:
            found.append(((*attachment.path, ATTACHMENT) if attachment.path else None, text))
    return [text for _, text in found], [path for path, _ in found]


PROMPT, TOOL_OUTPUT = "prompt", "tool_output"


def caller_kinds(request: NormalizedRequest, paths: list[Path | None] | None = None) -> list[str]:
    """What each text of ``caller_texts`` is, parallel to it: ``tool_output`` for the content
    of a ``tool`` message (tool results; a Responses ``function_call_output``
    and a Messages ``tool_result`` block arrive as one) and for text extracted from an
    attachment; ``prompt`` for everything else. Derived from the paths alone."""
    if paths is None:
        paths = caller_texts(request)[1]
    messages = getattr(request.body, "messages", None) if request.route == "chat" else None
    kinds = []
    for path in paths:
        if path is None or path[-1] == ATTACHMENT:
            kinds.append(TOOL_OUTPUT)
        elif messages is not None and path[0] == "messages" and path[2] == "content" \
                and type(messages[path[1]]) is ToolMessage:
            kinds.append(TOOL_OUTPUT)
        else:
            kinds.append(PROMPT)
    return kinds


def replace(body: dict, edits: list[tuple[Path, str]]) -> None:
    """Write each new text at its path in the decoded request body."""
    for path, text in edits:
        if path[-1] == ATTACHMENT:
            holder = _walk(body, path[:-2])
            holder[path[-2]] = {"type": "text", "text": text}
            continue
        if path[-1] == JSON:
            holder = _walk(body, path[:-2])
            holder[path[-2]] = msgspec.json.decode(text)
            continue
        holder = _walk(body, path[:-1])
        holder[path[-1]] = text


def _walk(body: Any, path: Path) -> Any:
    node = body
    for key in path:
        node = node[key]
    return node


__all__ = ["ATTACHMENT", "JSON", "PROMPT", "TOOL_OUTPUT", "caller_kinds", "caller_texts", "replace"]
