"""A refusal on a dialect route names the field in the client's own terms.

The stages after the dialect stage check the chat view and name what they refuse in chat's
terms (``messages[3].content[0].text``, ``tools[0].function.parameters``, ``max_tokens``).
``client_terms`` rewrites such a refusal's ``param`` (and the param where its message
quotes it) into the place in the client's request: the translation is run once more with
marks (each chat message, part, tool call and tool knows the client's place it came
from), so a refusal costs that and a request that is admitted costs nothing.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from ..errors import Refusal

_INDEXED = re.compile(r"^(messages|tools)\[(\d+)\](.*)$")
_PART = re.compile(r"^\.content\[(\d+)\](.*)$")
_CALL = re.compile(r"^\.tool_calls\[(\d+)\](.*)$")

# a chat tool's fields, as each API names them
_TOOL_FIELDS = {
    "messages": {".function.parameters": ".input_schema", ".function.name": ".name",
                 ".function.description": ".description", ".function.strict": ".strict", ".function": ""},
    "responses": {".function.parameters": ".parameters", ".function.name": ".name",
                  ".function.description": ".description", ".function.strict": ".strict", ".function": ""},
}
# a content part's fields, as each API names them
_PART_FIELDS = {"messages": {".image_url.url": ".source.url", ".image_url": ".source", ".file.file_data": ".source.data",
                             ".file": ".source"},
                "responses": {".image_url.url": ".image_url", ".file.file_data": ".file_data", ".file": ""}}
# a call's arguments, as each API names them
_CALL_FIELDS = {"messages": {".function.arguments": ".input", ".function.name": ".name", ".id": ".id"},
                "responses": {".function.arguments": ".arguments", ".function.name": ".name", ".id": ".call_id"}}
# top-level chat fields, as each API names them
_TOP = {
    "messages": {"max_tokens": "max_tokens", "max_completion_tokens": "max_tokens", "stop": "stop_sequences",
                 "user": "metadata.user_id", "response_format.json_schema.schema": "output_config.format.schema",
                 "response_format": "output_config.format", "reasoning_effort": "output_config.effort",
                 "parallel_tool_calls": "tool_choice.disable_parallel_tool_use", "messages": "messages",
                 "tools": "tools", "model": "model"},
    "responses": {"max_tokens": "max_output_tokens", "max_completion_tokens": "max_output_tokens",
                  "response_format.json_schema.schema": "text.format.schema", "response_format": "text.format",
                  "reasoning_effort": "reasoning.effort", "messages": "input", "tools": "tools", "model": "model"},
}


class ParamMap:
    """chat message index -> (its client place, {chat part index -> client place},
    {chat call index -> client place}); chat tool index -> client place."""

    def __init__(self, dialect: str, chat: dict[str, Any], marks: dict[int, str]) -> None:
        self.dialect = dialect
        self.messages: list[tuple[str | None, dict[int, str], dict[int, str]]] = []
        for message in chat.get("messages") or ():
            content = message.get("content")
            parts = {j: marks[id(p)] for j, p in enumerate(content) if id(p) in marks} if isinstance(
                content, list) else {}
            calls = {k: marks[id(c)] for k, c in enumerate(message.get("tool_calls") or ()) if id(c) in marks}
            self.messages.append((marks.get(id(message)), parts, calls))
        self.tools = [marks.get(id(tool)) for tool in chat.get("tools") or ()]

    def client(self, param: str) -> str:
        matched = _INDEXED.match(param)
        if matched is None:
            return self._top(param)
        kind, index, rest = matched.group(1), int(matched.group(2)), matched.group(3)
        if kind == "tools":
            place = self.tools[index] if index < len(self.tools) else None
            if place is None:
                return "tools"
            for chat_field, theirs in _TOOL_FIELDS[self.dialect].items():
                if rest.startswith(chat_field):
                    return place + theirs + rest[len(chat_field):]
            return place + rest
        if index >= len(self.messages):
            return "messages" if self.dialect == "messages" else "input"
        place, parts, calls = self.messages[index]
        part = _PART.match(rest)
        if part is not None and int(part.group(1)) in parts:
            inner = part.group(2)
            for chat_field, theirs in _PART_FIELDS[self.dialect].items():
                if inner.startswith(chat_field):
                    return parts[int(part.group(1))] + theirs + inner[len(chat_field):]
            return parts[int(part.group(1))] + inner
        call = _CALL.match(rest)
        if call is not None and int(call.group(1)) in calls:
            inner = call.group(2)
            for chat_field, theirs in _CALL_FIELDS[self.dialect].items():
                if inner.startswith(chat_field):
                    return calls[int(call.group(1))] + theirs + inner[len(chat_field):]
            return calls[int(call.group(1))]
        if place is None:
            return "messages" if self.dialect == "messages" else "input"
        return place + (rest if rest.startswith(".content") and place.endswith("]") else "")

    def _top(self, param: str) -> str:
        names = _TOP[self.dialect]
        for chat_name in sorted(names, key=len, reverse=True):
            if param == chat_name or param.startswith(chat_name + ".") or param.startswith(chat_name + "["):
                return names[chat_name] + param[len(chat_name):]
        return param


def client_terms(refusal: Refusal, dialect: str, translate: Callable[[dict[int, str]], dict[str, Any]]) -> Refusal:
    """``refusal`` with its param (and the param its message quotes) in the client's terms;
    ``translate(marks)`` runs the translation again, filling ``marks``."""
    param = refusal.param
    if not param:
        return refusal
    marks: dict[int, str] = {}
    try:
        chat = translate(marks)
    except Refusal:
        return refusal
    theirs = ParamMap(dialect, chat, marks).client(param)
    if theirs == param:
        return refusal
    return Refusal(refusal.reason, refusal.message.replace(param, theirs), param=theirs, headers=refusal.headers)
