"""Messages API <-> chat completions: the request forward, the whole answer back.

``unsupported(parsed)`` lists what only an upstream serving Anthropic's Messages API
natively can honour (server tools, MCP servers, containers, images inside a tool
result); ``chat_request(parsed)`` refuses the first of them and otherwise returns the
chat-completions request as a dict. ``message_from_chat`` turns a whole chat completion
into a Messages ``message`` object. ``count_tokens_body`` answers ``count_tokens``.
"""

from __future__ import annotations

import json
from typing import Any

from msgspec import UNSET

from ..errors import Reason, Refusal
from . import chat_answer
from .common import Unsupported, encode, new_id
from .messages_blocks import (
    SERVER_BLOCKS,
    Base64Image,
    Base64Pdf,
    ContentSource,
    DocumentBlock,
    ImageBlock,
    PlainTextSource,
    SearchResultBlock,
    TextBlock,
    ToolReferenceBlock,
    ToolResultBlock,
    ToolUseBlock,
    UrlSource,
)
from .messages_schema import (
    MessagesRequest,
    ChoiceAny,
    ChoiceAuto,
    ChoiceNone,
    ChoiceTool,
    Message,
    Parsed,
    block_type,
)

_NATIVE = "only an upstream that serves the Messages API natively can"
STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use",
                "function_call": "tool_use", "content_filter": "refusal"}
# output_config.effort -> chat's reasoning_effort (the values chat takes; "max" and "xhigh"
# ask for the most a chat backend offers)
EFFORT = {"low": "low", "medium": "medium", "high": "high", "xhigh": "high", "max": "high"}


def unsupported(parsed: Parsed) -> list[Unsupported]:
    """What this request asks that a translation to chat completions cannot do."""
    req = parsed.request
    out = [Unsupported("tools", f"the server tool `{kind}` runs on Anthropic's side: {_NATIVE} run it")
           for kind in parsed.server_tools]
    if req.mcp_servers:
        out.append(Unsupported("mcp_servers", f"MCP servers are called by the server: {_NATIVE} call them"))
    if isinstance(req, MessagesRequest) and req.container not in (UNSET, None):
        out.append(Unsupported("container", f"a container is kept by the server: {_NATIVE} use it"))
    if isinstance(req, MessagesRequest) and req.thread not in (UNSET, None):
        out.append(Unsupported("thread", f"a thread is kept by the server: {_NATIVE} continue it"))
    for i, message in enumerate(req.messages):
        for j, block in enumerate(message.content if isinstance(message.content, list) else ()):
            where = f"messages[{i}].content[{j}]"
            if isinstance(block, SERVER_BLOCKS):
                out.append(Unsupported(where, f"a `{block_type(block)}` block comes from a tool the server runs: "
                                       f"{_NATIVE} read it"))
            elif isinstance(block, ToolResultBlock) and isinstance(block.content, list):
                for k, inner in enumerate(block.content):
                    if not isinstance(inner, (TextBlock, SearchResultBlock, ToolReferenceBlock)) and not (
                            isinstance(inner, DocumentBlock) and not isinstance(inner.source, Base64Pdf)):
                        out.append(Unsupported(f"{where}.content[{k}]", f"a `{block_type(inner)}` inside a "
                                               "tool_result has no chat-completions equivalent (a tool message "
                                               "holds text)", False))
    return out


# -- request -------------------------------------------------------------------------


def chat_request(parsed: Parsed, checked: bool = False, native: bool = False,
                 marks: dict[int, str] | None = None) -> dict[str, Any]:
    """The chat-completions request for a Messages (or count_tokens) request.
    ``checked``: the caller already asked ``unsupported``. ``native``: the view of a request
    that goes to the upstream as it is (server-side blocks and tools are left out: the
    upstream's own, counted and screened apart, dialects/messages_doc.py). ``marks``: filled
    with where each chat message and part came from (id -> the client's param), to name a
    refusal's field in the client's terms (dialects/params.py)."""
    problems = [] if checked or native else unsupported(parsed)
    if problems:
        raise problems[0].refusal()
    req = parsed.request
    chat: dict[str, Any] = {"model": req.model, "messages": _messages(req, marks)}
    if isinstance(req, MessagesRequest):    # (count_tokens has no output bound nor sampling)
        _sampling(req, chat)
    if parsed.tools:
        places = {id(tool): i for i, tool in enumerate(parsed.all_tools)}
        chat["tools"] = [_mark(marks, {"type": "function", "function": _function(tool)},
                               f"tools[{places.get(id(tool), k)}]") for k, tool in enumerate(parsed.tools)]
    _tool_choice(req.tool_choice, chat)
    _output(req, chat)
    return chat


def _sampling(req: MessagesRequest, chat: dict[str, Any]) -> None:
    chat["max_tokens"] = req.max_tokens
    for value, theirs in ((req.stop_sequences, "stop"), (req.temperature, "temperature"), (req.top_p, "top_p"),
                          (req.top_k, "top_k")):
        if value is not UNSET:
            chat[theirs] = value
    metadata = req.metadata
    if metadata is not UNSET and isinstance(metadata.user_id, str):
        chat["user"] = metadata.user_id
    if req.stream is True:
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}


def _output(req: Any, chat: dict[str, Any]) -> None:
    """``output_config``: the effort as chat's reasoning effort, the format as structured
    output (under the plan's policy, as on chat)."""
    config = req.output_config
    if config is UNSET:
        return
    if isinstance(config.effort, str):
        chat["reasoning_effort"] = EFFORT[config.effort]
    fmt = config.format
    if fmt not in (UNSET, None):
        chat["response_format"] = {"type": "json_schema", "json_schema": {"name": "output", "schema": fmt.schema}}


def _function(tool: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": tool.name, "parameters": tool.input_schema}
    if isinstance(tool.description, str):
        out["description"] = tool.description
    if isinstance(tool.strict, bool):
        out["strict"] = tool.strict
    return out


def _tool_choice(choice: Any, chat: dict[str, Any]) -> None:
    if isinstance(choice, ChoiceAuto):
        chat["tool_choice"] = "auto"
    elif isinstance(choice, ChoiceAny):
        chat["tool_choice"] = "required"
    elif isinstance(choice, ChoiceTool):
        chat["tool_choice"] = {"type": "function", "function": {"name": choice.name}}
    elif isinstance(choice, ChoiceNone):
        chat["tool_choice"] = "none"
    if isinstance(choice, (ChoiceAuto, ChoiceAny, ChoiceTool)) and choice.disable_parallel_tool_use is True:
        chat["parallel_tool_calls"] = False


def _mark(marks: dict[int, str] | None, item: dict[str, Any], where: str) -> dict[str, Any]:
    if marks is not None:
        marks[id(item)] = where
    return item


def _messages(req: Any, marks: dict[int, str] | None = None) -> list[dict[str, Any]]:
    """The chat messages. System turns inside ``messages`` join the leading system message
    (chat templates of vLLM's Qwen, Llama and Mistral models refuse a system message that
    is not first), after ``system``, in order."""
    system: list[dict[str, Any]] = []
    if isinstance(req.system, str):
        system.append(_mark(marks, {"type": "text", "text": req.system}, "system"))
    elif isinstance(req.system, list):
        system.extend(_mark(marks, {"type": "text", "text": b.text}, f"system[{k}]") for k, b in enumerate(req.system))
    out: list[dict[str, Any]] = []
    for i, message in enumerate(req.messages):
        if message.role == "system":
            system.extend(_system_parts(message, i, marks))
        elif isinstance(message.content, str):
            turn = {"role": message.role, "content": message.content}
            if marks is not None:       # (most chat views are built with none: no place written)
                marks[id(turn)] = f"messages[{i}]"
            out.append(turn)
        elif message.role == "user":
            out.extend(_user(message, i, marks))
        else:
            out.append(_assistant(message, i, marks))
    if system:
        lead = system[0]["text"] if len(system) == 1 and isinstance(req.system, str) else system
        out.insert(0, _mark(marks, {"role": "system", "content": lead}, "system"))
    return out


def _system_parts(message: Message, i: int, marks: dict[int, str] | None) -> list[dict[str, Any]]:
    if isinstance(message.content, str):
        return [_mark(marks, {"type": "text", "text": message.content}, f"messages[{i}].content")]
    return [_mark(marks, {"type": "text", "text": block.text}, f"messages[{i}].content[{j}]")
            for j, block in enumerate(message.content) if isinstance(block, TextBlock)]


def _user(message: Message, i: int, marks: dict[int, str] | None = None) -> list[dict[str, Any]]:
    """Tool results first (each a tool message, right after the assistant's calls), then
    the rest of the turn as one user message."""
    tools: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for j, block in enumerate(message.content):
        where = f"messages[{i}].content[{j}]"
        if isinstance(block, ToolResultBlock):
            tools.append(_mark(marks, {"role": "tool", "tool_call_id": block.tool_use_id,
                                       "content": _result_text(block)}, where))
        elif isinstance(block, TextBlock):
            parts.append(_mark(marks, {"type": "text", "text": block.text}, where))
        elif isinstance(block, ImageBlock):
            parts.append(_mark(marks, {"type": "image_url", "image_url": {"url": _image_url(block)}}, where))
        elif isinstance(block, (DocumentBlock, SearchResultBlock)):
            parts.extend(_mark(marks, part, where) for part in _document_parts(block))
        elif not isinstance(block, SERVER_BLOCKS) and not _dropped(block):
            raise _misplaced(block, "user", where)
    return tools + ([_mark(marks, {"role": "user", "content": parts}, f"messages[{i}]")] if parts else [])


def _dropped(block: Any) -> bool:
    """Blocks a chat backend has no place for, dropped from the chat view: thinking and
    redacted thinking (their text is counted and screened apart when the body goes natively)."""
    return block_type(block) in ("thinking", "redacted_thinking")


def _document_parts(block: DocumentBlock | SearchResultBlock) -> list[dict[str, Any]]:
    """A document or a search result as chat parts: its title and context as text, then its
    content (text, images, a PDF as a file part validation reads)."""
    parts: list[dict[str, Any]] = []
    if isinstance(block, SearchResultBlock):
        heads: tuple[object, ...] = (block.title, block.source)
    else:
        heads = (block.title, block.context)
    parts.extend({"type": "text", "text": value} for value in heads if isinstance(value, str) and value)
    source = block.source
    if isinstance(block, SearchResultBlock):
        parts.extend({"type": "text", "text": inner.text} for inner in block.content)
    elif isinstance(source, PlainTextSource):
        parts.append({"type": "text", "text": source.data})
    elif isinstance(source, Base64Pdf):
        parts.append({"type": "file", "file": {"file_data": f"data:application/pdf;base64,{source.data}"}})
    elif isinstance(source, ContentSource):
        if isinstance(source.content, str):
            parts.append({"type": "text", "text": source.content})
        else:
            parts.extend({"type": "text", "text": inner.text} if isinstance(inner, TextBlock)
                         else {"type": "image_url", "image_url": {"url": _image_url(inner)}}
                         for inner in source.content)
    elif isinstance(source, UrlSource):
        parts.append({"type": "file", "file": {"file_data": source.url}})   # refused by validation: remote
    return parts


def _result_text(block: ToolResultBlock) -> Any:
    if block.content is UNSET:
        return ""
    if isinstance(block.content, str):
        return block.content
    out: list[dict[str, Any]] = []
    for inner in block.content:
        if isinstance(inner, TextBlock):
            out.append({"type": "text", "text": inner.text})
        elif isinstance(inner, (DocumentBlock, SearchResultBlock)):
            out.extend(part for part in _document_parts(inner) if part["type"] == "text")
        elif isinstance(inner, ToolReferenceBlock):
            out.append({"type": "text", "text": inner.tool_name})
    return out


def _image_url(block: ImageBlock) -> str:
    source = block.source
    if isinstance(source, Base64Image):
        return f"data:{source.media_type};base64,{source.data}"
    if isinstance(source, UrlSource):
        return source.url
    return ""   # a file_id: refused by the parse's rules


def _assistant(message: Message, i: int, marks: dict[int, str] | None = None) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for j, block in enumerate(message.content):
        if isinstance(block, TextBlock):
            parts.append(_mark(marks, {"type": "text", "text": block.text}, f"messages[{i}].content[{j}]"))
        elif isinstance(block, ToolUseBlock):
            raw = bytes(block.input)
            if not raw.lstrip().startswith(b"{"):
                param = f"messages[{i}].content[{j}].input"
                raise Refusal(Reason.invalid_field, f"Invalid value at {param}: a tool_use input must be an "
                              "object", param=param)
            calls.append(_mark(marks, {"id": block.id, "type": "function",
                                       "function": {"name": block.name, "arguments": raw.decode()}},
                               f"messages[{i}].content[{j}]"))
        elif not isinstance(block, SERVER_BLOCKS) and not _dropped(block):
            raise _misplaced(block, "assistant", f"messages[{i}].content[{j}]")
    # tool calls alone: content "" (OpenAI and vLLM take null too, llama.cpp's server and its
    # chat templates only a string)
    out: dict[str, Any] = _mark(marks, {"role": "assistant", "content": parts or ""}, f"messages[{i}]")
    if calls:
        out["tool_calls"] = calls
    return out


def _misplaced(block: Any, role: str, param: str) -> Refusal:
    return Refusal(Reason.invalid_field, f"Invalid value at {param}: a `{block_type(block)}` block is not allowed "
                   f"in a {role} message", param=param)


# -- answer --------------------------------------------------------------------------


def usage_object(usage: object, input_tokens: int = 0) -> dict[str, Any]:
    """Anthropic usage: ``input_tokens`` excludes the prompt tokens read from a cache."""
    counts = chat_answer.usage_counts(usage)
    if counts is None:
        return {"input_tokens": input_tokens, "output_tokens": 0}
    prompt, completion, cached, _ = counts
    return {"input_tokens": prompt - cached, "output_tokens": completion,
            "cache_read_input_tokens": cached, "cache_creation_input_tokens": 0}


def stop_of(parsed: Parsed, finish_reason: str | None, stop_reason: object) -> tuple[str, str | None]:
    """(stop_reason, stop_sequence): vLLM names the stop string that ended the answer."""
    req = parsed.request
    sequences = req.stop_sequences if isinstance(req, MessagesRequest) else UNSET
    if finish_reason == "stop" and isinstance(stop_reason, str) and sequences is not UNSET \
            and stop_reason in sequences:
        return "stop_sequence", stop_reason
    return STOP_REASONS.get(finish_reason or "", "end_turn"), None


def tool_input(name: str, arguments: str) -> Any:
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise Refusal(Reason.upstream_error, f"the model's arguments for the tool `{name}` are not a JSON object")
    return value


def message_from_chat(body: bytes | dict[str, Any], parsed: Parsed, *,
                      message_id: str | None = None, usage: object = None) -> dict[str, Any]:
    """A whole chat completion as a Messages ``message`` object."""
    answer = chat_answer.read(body)
    choice = answer.choices[0]
    content: list[dict[str, Any]] = []
    text = choice.message.content or choice.message.refusal
    if text:
        content.append({"type": "text", "text": text})
    for call in choice.message.tool_calls or ():
        content.append({"type": "tool_use", "id": call.id or new_id("toolu"), "name": call.function.name,
                        "input": tool_input(call.function.name, call.function.arguments)})
    stop_reason, stop_sequence = stop_of(parsed, choice.finish_reason, choice.stop_reason)
    return {"id": message_id or new_id("msg"), "type": "message", "role": "assistant",
            "model": parsed.request.model, "content": content, "stop_reason": stop_reason,
            "stop_sequence": stop_sequence, "usage": usage_object(usage if usage is not None else answer.usage)}


def count_tokens_body(input_tokens: int) -> bytes:
    """The answer of ``POST /v1/messages/count_tokens``."""
    return encode({"input_tokens": input_tokens})
