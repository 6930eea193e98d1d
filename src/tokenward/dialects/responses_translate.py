"""Responses API <-> chat completions: the request forward, the whole answer back.

``unsupported(parsed)`` lists what only an upstream serving the Responses API natively can
honour (stored state, built-in tools, ...); ``chat_request(parsed)`` refuses the first of
them and otherwise returns the chat-completions request as a dict (free-form JSON kept as
``msgspec.Raw``, so ``common.encode`` writes it byte for byte). ``response_from_chat``
turns a whole chat completion into a ``response`` object; ``response_shell`` is the object
both it and the stream translator (``responses_stream``) fill.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
from msgspec import UNSET

from ..errors import Reason, Refusal
from . import chat_answer
from .common import Unsupported, encode, new_id
from .responses_items import (
    CompactionItem,
    CustomToolCallItem,
    CustomToolCallOutputItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    InputFile,
    InputImage,
    InputText,
    ItemReference,
    MessageItem,
    OutputText,
    RefusalContent,
)
from .responses_schema import (
    AllowedToolsChoice,
    CustomGrammarFormat,
    CustomTool,
    FlatTool,
    CustomChoice,
    FunctionChoice,
    Parsed,
    TextFormatJsonObject,
    TextFormatJsonSchema,
    allowed_names,
)

_NATIVE = "only an upstream that serves the Responses API natively can"


def unsupported(parsed: Parsed) -> list[Unsupported]:
    """What this request asks that a translation to chat completions cannot do."""
    req = parsed.request
    out: list[Unsupported] = []
    if isinstance(req.previous_response_id, str):
        out.append(Unsupported("previous_response_id", "previous_response_id needs a stored response: the gateway "
                               f"keeps none and {_NATIVE}; send the whole conversation in `input`"))
    if req.store is True:
        out.append(Unsupported("store", f"store: true asks for the response to be kept: {_NATIVE}; send store: false"))
    if req.background is True:
        out.append(Unsupported("background", f"background responses are run and kept by the server: {_NATIVE}"))
    if req.conversation not in (UNSET, None):
        out.append(Unsupported("conversation", f"`conversation` refers to state kept by OpenAI: {_NATIVE} resolve it"))
    if req.prompt not in (UNSET, None):
        out.append(Unsupported("prompt", f"`prompt` refers to a template kept by OpenAI: {_NATIVE} resolve it"))
    for kind in parsed.builtin_tools:
        out.append(Unsupported("tools", f"the built-in tool `{kind}` runs on OpenAI's servers: {_NATIVE} run it"))
    if parsed.server_choice:
        out.append(Unsupported("tool_choice", f"tool_choice names a tool OpenAI's servers run: {_NATIVE} run it"))
    for i, kind in parsed.server_items:
        out.append(Unsupported(f"input[{i}]", f"a `{kind}` item comes from a tool the server runs: {_NATIVE} read it"))
    if req.truncation == "auto":
        out.append(Unsupported("truncation", f"truncation: auto drops input to fit the context: {_NATIVE} do it"))
    if isinstance(req.max_tool_calls, int):
        out.append(Unsupported("max_tool_calls", f"max_tool_calls bounds a server-side tool loop: {_NATIVE}"))
    if isinstance(req.top_logprobs, int) and req.top_logprobs > 0:
        out.append(Unsupported("top_logprobs", f"log probabilities in a response: {_NATIVE} return them"))
    if req.reasoning not in (None, UNSET) and req.reasoning.effort in ("xhigh", "max"):
        out.append(Unsupported("reasoning.effort", f"reasoning effort `{req.reasoning.effort}` has no chat-completions equivalent"))
    out.extend(_unsupported_items(parsed))
    return out


def _unsupported_items(parsed: Parsed) -> list[Unsupported]:
    out: list[Unsupported] = []
    for i, item in enumerate(parsed.items):
        if isinstance(item, ItemReference):
            out.append(Unsupported(f"input[{i}]", f"an item_reference names a stored item: {_NATIVE} resolve it"))
            continue
        if isinstance(item, CompactionItem):
            out.append(Unsupported(f"input[{i}]", f"a compaction item is context encrypted by the server: {_NATIVE} "
                                   "read it"))
            continue
        parts = (item.content if isinstance(item, MessageItem) else item.output
                 if isinstance(item, (FunctionCallOutputItem, CustomToolCallOutputItem)) else "")
        for j, part in enumerate(parts if isinstance(parts, list) else ()):
            if isinstance(part, (InputImage, InputFile)) and isinstance(part.file_id, str):
                out.append(Unsupported(f"input[{i}].content[{j}].file_id",
                                       f"a file_id names a file stored at OpenAI: {_NATIVE} read it", False))
            elif isinstance(part, InputFile) and isinstance(part.file_url, str):
                out.append(Unsupported(f"input[{i}].content[{j}].file_url",
                                       f"a file_url is fetched by the server: {_NATIVE} fetch it", False))
            elif isinstance(item, FunctionCallOutputItem) and not isinstance(part, InputText):
                out.append(Unsupported(f"input[{i}].output[{j}]", "a function_call_output with an image or a file "
                                       "has no chat-completions equivalent (a tool message holds text)", False))
    return out


# -- request -------------------------------------------------------------------------


def chat_request(parsed: Parsed, checked: bool = False, native: bool = False,
                 marks: dict[int, str] | None = None) -> dict[str, Any]:
    """The chat-completions request for a Responses request (a ``Refusal`` if none exists).
    ``checked``: the caller already asked ``unsupported``. ``native``: the view of a request
    that goes to the upstream as it is: every function tool (``allowed_tools`` narrows
    nothing here, the upstream does it), server-side items left out (the upstream's own,
    counted and screened apart, dialects/responses_doc.py). ``marks``: filled with where each
    chat message, part and tool came from (id -> the client's param: dialects/params.py)."""
    problems = [] if checked or native else unsupported(parsed)
    if problems:
        raise problems[0].refusal()
    req = parsed.request
    chat: dict[str, Any] = {"model": req.model, "messages": _messages(parsed, marks)}
    if isinstance(req.max_output_tokens, int):
        chat["max_tokens"] = req.max_output_tokens
    for name, value in (("temperature", req.temperature), ("top_p", req.top_p),
                        ("parallel_tool_calls", req.parallel_tool_calls), ("user", req.user),
                        ("safety_identifier", req.safety_identifier), ("prompt_cache_key", req.prompt_cache_key)):
        if value is not UNSET and value is not None:
            chat[name] = value
    if req.stream is True:
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}
    _tools(parsed, chat, native, marks)
    if req.text not in (None, UNSET) and req.text.format is not UNSET:
        fmt = req.text.format
        if isinstance(fmt, TextFormatJsonSchema):
            spec = {"name": fmt.name, "schema": fmt.schema}
            spec.update(_present(fmt, ("description", "strict")))
            chat["response_format"] = {"type": "json_schema", "json_schema": spec}
        elif isinstance(fmt, TextFormatJsonObject):
            chat["response_format"] = {"type": "json_object"}
    if req.reasoning not in (None, UNSET) and req.reasoning.effort in ("minimal", "low", "medium", "high"):
        chat["reasoning_effort"] = req.reasoning.effort
    return chat


def _present(struct: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """The fields ``names`` of ``struct`` that are set."""
    values = msgspec.structs.asdict(struct)
    return {n: values[n] for n in names if values[n] is not UNSET and values[n] is not None}


def _tools(parsed: Parsed, chat: dict[str, Any], native: bool, marks: dict[int, str] | None = None) -> None:
    """Every client-run tool (top level, and in ``additional_tools`` items) as a chat
    function, a namespace's members flattened to ``NAMESPACE__TOOL`` (their calls are named
    back in the answer, ``tool_names``)."""
    tools = parsed.flat
    choice: Any = parsed.tool_choice
    if isinstance(choice, AllowedToolsChoice):
        if not native:
            allowed = allowed_names(choice)
            tools = [tool for tool in tools if tool.name in allowed or tool.entitled in allowed]
        choice = choice.mode
    if tools:
        chat["tools"] = [_mark(marks, {"type": "function", "function": _function(tool)}, tool.param)
                         for tool in tools]
    if isinstance(choice, (FunctionChoice, CustomChoice)):
        chat["tool_choice"] = {"type": "function", "function": {"name": choice.name}}
    elif isinstance(choice, str):
        chat["tool_choice"] = choice


# A custom tool's free-form input, as a chat function's one argument
CUSTOM_INPUT = "input"


def _function(flat: FlatTool) -> dict[str, Any]:
    tool = flat.tool
    out: dict[str, Any] = {"name": flat.chat_name}
    if isinstance(tool, CustomTool):
        # a chat backend has no free-form tool: a function of one string, its grammar (which
        # a chat backend cannot enforce) told to the model in the description
        description = tool.description if isinstance(tool.description, str) else ""
        if isinstance(tool.format, CustomGrammarFormat):
            description += (f"\n\nThe `{CUSTOM_INPUT}` argument follows this {tool.format.syntax} grammar:\n"
                            f"{tool.format.definition}")
        if description:
            out["description"] = description
        out["parameters"] = {"type": "object", "properties": {CUSTOM_INPUT: {"type": "string"}},
                             "required": [CUSTOM_INPUT]}
        return out
    out.update(_present(tool, ("description", "strict")))
    if tool.parameters is not UNSET:
        out["parameters"] = tool.parameters
    return out


def chat_name(name: str, namespace: object) -> str:
    """A tool call's name as the chat view names its tool."""
    return f"{namespace}__{name}" if isinstance(namespace, str) and namespace else name


def tool_names(parsed: Parsed) -> dict[str, FlatTool]:
    """chat name -> the tool, for the flattened and custom ones (their calls are named back)."""
    return {tool.chat_name: tool for tool in parsed.flat
            if tool.namespace is not None or isinstance(tool.tool, CustomTool)}


def _call(item: FunctionCallItem | CustomToolCallItem) -> dict[str, Any]:
    arguments = item.arguments if isinstance(item, FunctionCallItem) else encode({CUSTOM_INPUT: item.input}).decode()
    return {"id": item.call_id, "type": "function",
            "function": {"name": chat_name(item.name, item.namespace), "arguments": arguments}}


def _mark(marks: dict[int, str] | None, item: dict[str, Any], where: str) -> dict[str, Any]:
    if marks is not None:
        marks[id(item)] = where
    return item


def _messages(parsed: Parsed, marks: dict[int, str] | None = None) -> list[dict[str, Any]]:
    req = parsed.request
    out: list[dict[str, Any]] = []
    if isinstance(req.instructions, str):
        out.append(_mark(marks, {"role": "system", "content": req.instructions}, "instructions"))
    if isinstance(req.input, str):
        out.append(_mark(marks, {"role": "user", "content": req.input}, "input"))
    for i, item in enumerate(parsed.all_items):
        if isinstance(item, MessageItem):
            out.append(_message(item, i, marks))
        elif isinstance(item, (FunctionCallItem, CustomToolCallItem)):
            call = _mark(marks, _call(item), f"input[{i}]")
            last = out[-1] if out else None
            if last is not None and last["role"] == "assistant" and last.get("_open"):
                last.setdefault("tool_calls", []).append(call)
            else:
                # content "": OpenAI and vLLM take null too, llama.cpp's server (and its chat
                # templates, which read message.content) only a string
                out.append({"role": "assistant", "content": "", "tool_calls": [call], "_open": True})
        elif isinstance(item, (FunctionCallOutputItem, CustomToolCallOutputItem)):
            content = item.output if isinstance(item.output, str) else [
                {"type": "text", "text": part.text} for part in item.output if isinstance(part, InputText)]
            out.append(_mark(marks, {"role": "tool", "tool_call_id": item.call_id, "content": content}, f"input[{i}]"))
        # reasoning items: a chat backend has no place for them; dropped (their text is
        # counted and screened apart when the body goes natively). Server-side items:
        # refused when translated, the upstream's own when native. additional_tools
        # items: their tools joined the request's (``_tools``).
    for message in out:
        message.pop("_open", None)
    if not out:
        raise Refusal(Reason.invalid_field, "the request has no input to answer", param="input")
    return out


def _message(item: MessageItem, i: int, marks: dict[int, str] | None = None) -> dict[str, Any]:
    if isinstance(item.content, str):
        content: Any = item.content
    else:
        content = [_mark(marks, _part(part, item.role, f"input[{i}].content[{j}]"), f"input[{i}].content[{j}]")
                   for j, part in enumerate(item.content)]
    message: dict[str, Any] = {"role": item.role, "content": content}
    if marks is not None:       # (most chat views are built with none: no place written)
        marks[id(message)] = f"input[{i}]"
    if item.role == "assistant":
        message["_open"] = True   # function_call items right after it join its tool_calls
    return message


def _part(part: Any, role: str, param: str) -> dict[str, Any]:
    if isinstance(part, (InputText, OutputText)) and (role == "assistant") == isinstance(part, OutputText):
        return {"type": "text", "text": part.text}
    if isinstance(part, InputText) and role != "user":
        return {"type": "text", "text": part.text}
    if role == "user" and isinstance(part, InputImage) and isinstance(part.image_url, str):
        image: dict[str, Any] = {"url": part.image_url}
        if part.detail in ("auto", "low", "high"):
            image["detail"] = part.detail
        return {"type": "image_url", "image_url": image}
    if role == "user" and isinstance(part, InputFile) and isinstance(part.file_data, str):
        return {"type": "file", "file": _present(part, ("file_data", "filename"))}
    if role == "assistant" and isinstance(part, RefusalContent):
        return {"type": "refusal", "refusal": part.refusal}
    kind = type(part).__struct_config__.tag
    raise Refusal(Reason.invalid_field, f"Invalid value at {param}: a `{kind}` part is not allowed in a "
                  f"{role} message", param=param)


# -- answer --------------------------------------------------------------------------


def response_shell(parsed: Parsed, response_id: str, created_at: int, model: str,
                   max_output_tokens: int | None = None) -> dict[str, Any]:
    """A ``response`` object echoing the request, with no output yet (status in_progress)."""
    req = parsed.request
    fmt = req.text.format if req.text not in (None, UNSET) and req.text.format is not UNSET else None
    choice = parsed.tool_choice
    return {
        "id": response_id, "object": "response", "created_at": created_at, "status": "in_progress",
        "model": model or req.model, "output": [], "error": None, "incomplete_details": None,
        "instructions": req.instructions if isinstance(req.instructions, str) else None,
        # the output bound the gateway used (set from the plan's default, or clamped)
        "max_output_tokens": max_output_tokens if max_output_tokens is not None
        else req.max_output_tokens if isinstance(req.max_output_tokens, int) else None,
        "metadata": req.metadata if isinstance(req.metadata, dict) else {},
        "parallel_tool_calls": req.parallel_tool_calls is not False,
        "temperature": req.temperature if isinstance(req.temperature, float) else None,
        "top_p": req.top_p if isinstance(req.top_p, float) else None,
        "tool_choice": choice if isinstance(choice, (str, AllowedToolsChoice, FunctionChoice, CustomChoice))
        else "auto",
        "tools": [{"type": "function", "name": t.name, "parameters": t.parameters if t.parameters is not UNSET
                   else None, "strict": t.strict if isinstance(t.strict, bool) else None,
                   "description": t.description if isinstance(t.description, str) else None}
                  for t in parsed.functions],
        "text": {"format": fmt if fmt is not None else {"type": "text"}},
        "store": False, "background": False, "previous_response_id": None, "usage": None,
        "user": req.user if isinstance(req.user, str) else None,
    }


def usage_object(usage: object) -> dict[str, Any] | None:
    counts = chat_answer.usage_counts(usage)
    if counts is None:
        return None
    prompt, completion, cached, reasoning = counts
    return {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
            "output_tokens": completion, "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": prompt + completion}


def finish_status(shell: dict[str, Any], finish_reason: str | None) -> None:
    """Completed, or incomplete with its reason (the output bound, a content filter)."""
    reason = {"length": "max_output_tokens", "content_filter": "content_filter"}.get(finish_reason or "")
    shell["status"] = "incomplete" if reason else "completed"
    shell["incomplete_details"] = {"reason": reason} if reason else None


def message_item(item_id: str, text: str | None, refusal: str | None, status: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if text is not None:
        content.append({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
    if refusal is not None:
        content.append({"type": "refusal", "refusal": refusal})
    return {"id": item_id, "type": "message", "role": "assistant", "status": status, "content": content}


def call_item(item_id: str, call_id: str, name: str, arguments: str, status: str,
              tool: FlatTool | None = None) -> dict[str, Any]:
    """A function call as the client named its tool: a namespace's member by its own name
    and ``namespace``; a custom tool's call as a ``custom_tool_call`` with its free input."""
    if tool is None:
        return {"id": item_id, "type": "function_call", "call_id": call_id, "name": name,
                "arguments": arguments, "status": status}
    if isinstance(tool.tool, CustomTool):
        item = {"id": item_id, "type": "custom_tool_call", "call_id": call_id, "name": tool.name,
                "input": custom_input(arguments) if status == "completed" else ""}
    else:
        item = {"id": item_id, "type": "function_call", "call_id": call_id, "name": tool.name,
                "arguments": arguments, "status": status}
    if tool.namespace is not None:
        item["namespace"] = tool.namespace
    return item


def custom_input(arguments: str) -> str:
    """A custom tool's input from the chat function's arguments (``{"input": ...}``); the
    arguments as they are when the model wrote something else."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    text = value.get(CUSTOM_INPUT) if isinstance(value, dict) else None
    return text if isinstance(text, str) else arguments


def response_from_chat(body: bytes | dict[str, Any], parsed: Parsed, *,
                       response_id: str | None = None, max_output_tokens: int | None = None,
                       usage: object = None) -> dict[str, Any]:
    """A whole chat completion as a Responses ``response`` object."""
    answer = chat_answer.read(body)
    choice = answer.choices[0]
    shell = response_shell(parsed, response_id or new_id("resp"), answer.created, answer.model, max_output_tokens)
    message = choice.message
    if message.content or message.refusal is not None:
        shell["output"].append(message_item(new_id("msg"), message.content, message.refusal, "completed"))
    names = tool_names(parsed)
    for call in message.tool_calls or ():
        shell["output"].append(call_item(new_id("fc"), call.id or new_id("call"), call.function.name,
                                         call.function.arguments, "completed", names.get(call.function.name)))
    finish_status(shell, choice.finish_reason)
    shell["usage"] = usage_object(usage if usage is not None else answer.usage)
    return shell
