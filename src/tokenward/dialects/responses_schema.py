"""Strict Structs for ``POST /v1/responses`` (OpenAI's Responses API).

Shapes follow the official ``openai`` package's request types
(``openai.types.responses.response_create_params``), pinned in the test extra; a test walks
them (tests/dialects/test_sdk_coverage.py). As for Messages (messages_schema.py), every
field is text (screened, masked, counted: responses_doc.py), structure, opaque state
(``encrypted_content``: base64, bounded), server side (items and tools of tools the
upstream runs: kept as JSON, screened as JSON text, forwarded only natively), or refused /
dropped by a rule (``TOP_RULES``).

Two lists are free-form in the API, their elements told apart by ``type`` (and an input
message may omit its ``type``): ``input`` items and ``tools``. They are decoded as ``Raw``
here and each element strictly by ``parse``, with errors naming ``input[3].content[0].text``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

import msgspec
from msgspec import UNSET, Meta, Raw, UnsetType

from ..errors import Reason, Refusal
from ..validation.bounded import decode_request
from ..validation.schemas import Opt, ShortText, Strict, ToolName
from .common import StateId, decode_sub, type_of
from .responses_items import (
    CompactionItem,
    CustomToolCallItem,
    CustomToolCallOutputItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    ItemReference,
    MessageItem,
    OutputText,
    ReasoningItem,
    SERVER_ITEMS,
)

PositiveInt = Annotated[int, Meta(ge=1)]
Metadata = Annotated[dict[Annotated[str, Meta(max_length=64)], Annotated[str, Meta(max_length=512)]],
                     Meta(max_length=16)]
# Codex's client_metadata carries a JSON document of its turn in one value
ClientMetadata = Annotated[dict[Annotated[str, Meta(max_length=64)], Annotated[str, Meta(max_length=8192)]],
                           Meta(max_length=32)]

# -- tools, text format, reasoning ---------------------------------------------------

CallerKinds = Opt[list[Literal["direct", "programmatic"]]]


class FunctionTool(Strict, kw_only=True):
    type: Literal["function"]
    name: ToolName
    description: Opt[str] = UNSET
    parameters: Union[Raw, UnsetType] = UNSET   # a JSON schema, or null
    strict: Opt[bool] = UNSET
    output_schema: Union[Raw, UnsetType] = UNSET
    defer_loading: Union[bool, UnsetType] = UNSET
    allowed_callers: CallerKinds = UNSET
    async_: Union[bool, UnsetType] = msgspec.field(name="async", default=UNSET)


class CustomTextFormat(Strict, tag_field="type", tag="text", kw_only=True):
    pass


class CustomGrammarFormat(Strict, tag_field="type", tag="grammar", kw_only=True):
    definition: str
    syntax: Literal["lark", "regex"]


class CustomTool(Strict, kw_only=True):
    """A client-run tool whose input is free text (a patch, a script), optionally held to a
    grammar the model's output must follow."""

    type: Literal["custom"]
    name: ToolName
    description: Opt[str] = UNSET
    format: Union[CustomTextFormat, CustomGrammarFormat, UnsetType] = UNSET
    defer_loading: Union[bool, UnsetType] = UNSET
    allowed_callers: CallerKinds = UNSET
    async_: Union[bool, UnsetType] = msgspec.field(name="async", default=UNSET)


class NamespaceTool(Strict, kw_only=True):
    """A group of client-run tools (Codex's ``functions``, ``clock``, ...): each is
    entitled as ``NAMESPACE.TOOL`` and flattened for a chat backend (``FlatTool``)."""

    type: Literal["namespace"]
    name: ToolName
    description: Opt[str] = UNSET
    tools: list[Raw]


class AdditionalToolsItem(Strict, kw_only=True):
    """Tools declared inside ``input`` (Codex sends its tools so, keeping the top of the
    prompt stable for caching): they join the request's tools."""

    type: Literal["additional_tools"]
    tools: list[Raw]
    id: Union[StateId, UnsetType] = UNSET
    role: Union[Literal["developer", "system", "user"], UnsetType] = UNSET


InputItem = Union[MessageItem, FunctionCallItem, FunctionCallOutputItem, ReasoningItem, CustomToolCallItem,
                  CustomToolCallOutputItem, CompactionItem, ItemReference, AdditionalToolsItem]


class FlatTool(msgspec.Struct, frozen=True):
    """A client-run tool as a chat backend sees it: ``chat_name`` (``NAMESPACE__TOOL`` for a
    namespace's member), ``entitled`` (the name the plan's ``allow_tools`` matches:
    ``NAMESPACE.TOOL``), where it came from, and the tool itself."""

    chat_name: str
    entitled: str
    name: str
    namespace: Union[str, None]
    tool: Any     # FunctionTool | CustomTool
    param: str = "tools"   # where the client's request has it (tools[2], input[0].tools[1].tools[3])


class FunctionChoice(Strict, tag_field="type", tag="function", kw_only=True):
    name: ToolName


class CustomChoice(Strict, tag_field="type", tag="custom", kw_only=True):
    name: ToolName


class AllowedToolsChoice(Strict, tag_field="type", tag="allowed_tools", kw_only=True):
    mode: Literal["auto", "required"]
    tools: Annotated[list[Raw], Meta(min_length=1)]   # tool references: {type, name, ...}


class _AllowedFunction(Strict, kw_only=True):
    type: Literal["function", "custom"]
    name: ToolName


ToolChoice = Union[Literal["none", "auto", "required"], FunctionChoice, CustomChoice, AllowedToolsChoice]
# tool_choice naming a tool the upstream runs ({"type": "file_search"}, {"type": "mcp", ...}):
# kept as JSON for a native upstream
SERVER_CHOICES = frozenset({
    "file_search", "web_search_preview", "web_search_preview_2025_03_11", "computer", "computer_use",
    "computer_use_preview", "image_generation", "code_interpreter", "mcp", "programmatic_tool_calling",
    "apply_patch", "shell",
})


class TextFormatText(Strict, tag_field="type", tag="text", kw_only=True):
    pass


class TextFormatJsonObject(Strict, tag_field="type", tag="json_object", kw_only=True):
    pass


class TextFormatJsonSchema(Strict, tag_field="type", tag="json_schema", kw_only=True):
    name: ToolName
    schema: Raw
    description: Opt[str] = UNSET
    strict: Opt[bool] = UNSET


class TextConfig(Strict, kw_only=True):
    format: Union[TextFormatText, TextFormatJsonObject, TextFormatJsonSchema, UnsetType] = UNSET
    verbosity: Opt[Literal["low", "medium", "high"]] = UNSET


Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]


class Reasoning(Strict, kw_only=True):
    effort: Opt[Effort] = UNSET
    summary: Opt[Literal["auto", "concise", "detailed"]] = UNSET
    generate_summary: Opt[Literal["auto", "concise", "detailed"]] = UNSET
    context: Opt[Literal["auto", "current_turn", "all_turns"]] = UNSET
    mode: Union[ShortText, UnsetType] = UNSET


class StreamOptions(Strict, kw_only=True):
    include_obfuscation: Opt[bool] = UNSET


class ContextManagement(Strict, kw_only=True):
    type: ShortText
    compact_threshold: Opt[Annotated[int, Meta(ge=0)]] = UNSET


class PromptCacheOptions(Strict, kw_only=True):
    comparison_response_id: Opt[StateId] = UNSET
    mode: Union[Literal["implicit", "explicit"], UnsetType] = UNSET
    prewarm: Union[bool, UnsetType] = UNSET
    ttl: Union[Literal["30m", "12h"], UnsetType] = UNSET


class ImageOptions(Strict, kw_only=True):
    context_compression: Union[Literal["auto", "enabled", "disabled"], UnsetType] = UNSET


class BackgroundOptions(Strict, kw_only=True):
    completion_window: Union[Literal["soonest", "2h", "8h"], UnsetType] = UNSET
    continuation_id: Union[StateId, UnsetType] = UNSET


class ConversationRef(Strict, kw_only=True):
    id: StateId


class PromptRef(Strict, kw_only=True):
    """A prompt template stored at OpenAI (stateful), with variables (text)."""

    id: StateId
    variables: Union[dict[Annotated[str, Meta(max_length=64)], Raw], UnsetType] = UNSET
    version: Opt[ShortText] = UNSET


# -- the request ---------------------------------------------------------------------


class ResponsesRequest(Strict, kw_only=True):
    model: ShortText
    input: Union[str, list[Raw], UnsetType] = UNSET
    instructions: Opt[str] = UNSET
    max_output_tokens: Opt[PositiveInt] = UNSET
    tools: Opt[list[Raw]] = UNSET
    tool_choice: Union[Raw, UnsetType] = UNSET       # decoded by ``parse`` (Parsed.tool_choice)
    parallel_tool_calls: Opt[bool] = UNSET
    max_tool_calls: Opt[PositiveInt] = UNSET
    temperature: Opt[Annotated[float, Meta(ge=0.0, le=2.0)]] = UNSET
    top_p: Opt[Annotated[float, Meta(ge=0.0, le=1.0)]] = UNSET
    top_logprobs: Opt[Annotated[int, Meta(ge=0, le=20)]] = UNSET
    stream: Opt[bool] = UNSET
    stream_options: Opt[StreamOptions] = UNSET
    store: Opt[bool] = UNSET
    previous_response_id: Opt[StateId] = UNSET
    conversation: Union[StateId, ConversationRef, None, UnsetType] = UNSET   # state kept upstream
    prompt: Opt[PromptRef] = UNSET
    background: Opt[bool] = UNSET
    background_options: Union[BackgroundOptions, UnsetType] = UNSET
    metadata: Opt[Metadata] = UNSET
    client_metadata: Opt[ClientMetadata] = UNSET      # Codex sends it on every request
    user: Opt[ShortText] = UNSET
    safety_identifier: Opt[ShortText] = UNSET
    prompt_cache_key: Opt[ShortText] = UNSET
    prompt_cache_retention: Opt[Literal["in-memory", "in_memory", "24h"]] = UNSET
    prompt_cache_options: Union[PromptCacheOptions, UnsetType] = UNSET
    service_tier: Opt[Literal["auto", "default", "flex", "scale", "priority", "fast", "ultrafast"]] = UNSET
    text: Opt[TextConfig] = UNSET
    reasoning: Opt[Reasoning] = UNSET
    truncation: Opt[Literal["auto", "disabled"]] = UNSET
    include: Opt[list[Annotated[str, Meta(max_length=64)]]] = UNSET
    context_management: Opt[list[ContextManagement]] = UNSET
    image: Union[ImageOptions, UnsetType] = UNSET
    # dropped by a rule (TOP_RULES)
    moderation: Union[Raw, UnsetType] = UNSET
    access_programs: Union[Raw, UnsetType] = UNSET


# Fields not forwarded as they are (docs/dialects.md): dropped, with why.
TOP_RULES: dict[str, str] = {
    "moderation": "moderation by another model at OpenAI; the gateway screens the request itself",
    "access_programs": "access programs are an OpenAI account's settings",
}

# Built-in tools: run by OpenAI (or defined by it), so only an upstream serving responses
# natively has them. ``namespace`` and ``custom`` hold client-run tools.
BUILTIN_TOOLS = frozenset({
    "web_search", "web_search_preview", "web_search_2025_08_26", "web_search_preview_2025_03_11",
    "file_search", "computer", "computer_use", "computer_use_preview", "code_interpreter", "image_generation",
    "mcp", "local_shell", "shell", "apply_patch", "tool_search", "programmatic_tool_calling",
})


class Parsed(msgspec.Struct, kw_only=True):
    """A Responses request: its top level, its items and tools decoded strictly. ``items``
    and ``all_tools`` keep the request's order, server-side ones as their raw JSON."""

    request: ResponsesRequest
    items: list[InputItem]
    functions: list[FunctionTool]
    builtin_tools: list[str]      # the ``type`` of each built-in tool, in order
    all_items: list[Union[InputItem, Raw]] = []
    all_tools: list[Union[FunctionTool, CustomTool, NamespaceTool, Raw]] = []
    flat: list[FlatTool] = []     # every client-run tool, top level and in additional_tools, flattened
    server_items: list[tuple[int, str]] = []   # (index in input, type) of each server-side item
    tool_choice: Union[ToolChoice, None, UnsetType] = UNSET
    server_choice: bool = False   # tool_choice names a tool the upstream runs


_REQUEST = msgspec.json.Decoder(ResponsesRequest)
_ITEMS: dict[str, msgspec.json.Decoder[Any]] = {
    "message": msgspec.json.Decoder(MessageItem),
    "function_call": msgspec.json.Decoder(FunctionCallItem),
    "function_call_output": msgspec.json.Decoder(FunctionCallOutputItem),
    "reasoning": msgspec.json.Decoder(ReasoningItem),
    "custom_tool_call": msgspec.json.Decoder(CustomToolCallItem),
    "custom_tool_call_output": msgspec.json.Decoder(CustomToolCallOutputItem),
    "compaction": msgspec.json.Decoder(CompactionItem),
    "item_reference": msgspec.json.Decoder(ItemReference),
    "additional_tools": msgspec.json.Decoder(AdditionalToolsItem),
}
_FUNCTION = msgspec.json.Decoder(FunctionTool)
_TOOLS: dict[str, msgspec.json.Decoder[Any]] = {
    "function": _FUNCTION,
    "custom": msgspec.json.Decoder(CustomTool),
    "namespace": msgspec.json.Decoder(NamespaceTool),
}
_ALLOWED = msgspec.json.Decoder(_AllowedFunction)
_CHOICE = msgspec.json.Decoder(Union[ToolChoice, None])


def parse(body: bytes) -> Parsed:
    """The body as a ``Parsed`` request, or a ``Refusal`` (unknown field, bad value, ...)."""
    req = decode_request(body, _REQUEST)
    if req.input is UNSET and req.prompt is UNSET:
        raise Refusal(Reason.invalid_field, "Missing required parameter: input", param="input")
    items: list[InputItem] = []
    every: list[Union[InputItem, Raw]] = []
    server_items: list[tuple[int, str]] = []
    more_tools: list[tuple[int, AdditionalToolsItem]] = []
    for i, raw in enumerate(req.input if isinstance(req.input, list) else ()):
        kind = type_of(raw, "message")
        decoder = _ITEMS.get(kind) if isinstance(kind, str) else None
        if decoder is not None:
            try:
                item = decoder.decode(raw)
            except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
                item = decode_sub(raw, decoder, f"input[{i}]")     # raises, naming the item's place
            items.append(item)
            every.append(item)
            if kind == "message":
                if isinstance(item.content, list):
                    _no_logprobs(item.content)
            elif kind == "additional_tools":
                more_tools.append((i, item))
        elif isinstance(kind, str) and kind in SERVER_ITEMS:
            server_items.append((i, kind))
            every.append(raw)
        else:
            raise Refusal(Reason.invalid_field, f"Invalid value at input[{i}].type: unsupported item type"
                          f" {str(kind)[:64]!r}", param=f"input[{i}].type")
    tools, builtin, flat = _tools(req.tools or [], "tools")
    for i, added in more_tools:
        more, more_builtin, more_flat = _tools(added.tools, f"input[{i}].tools")
        added.tools = more       # typed, for the render
        builtin += more_builtin
        flat += more_flat
    if len(flat) > 1:
        _no_clash(flat)
    functions = [t.tool for t in flat if isinstance(t.tool, FunctionTool) and t.namespace is None] if flat else []
    req.moderation = UNSET          # dropped by a rule (TOP_RULES)
    req.access_programs = UNSET
    parsed = Parsed(request=req, items=items, functions=functions, builtin_tools=builtin, all_items=every,
                    all_tools=tools, server_items=server_items, flat=flat)
    _tool_choice(req, parsed)
    return parsed


def _tool_choice(req: ResponsesRequest, parsed: Parsed) -> None:
    raw = req.tool_choice
    if raw is UNSET:
        return
    kind = type_of(raw)
    if isinstance(kind, str) and kind in SERVER_CHOICES:
        parsed.server_choice = True
        return
    parsed.tool_choice = decode_sub(raw, _CHOICE, "tool_choice")


def _tools(raws: list[Raw], where: str) -> tuple[list[Any], list[str], list[FlatTool]]:
    """A tool list decoded: each tool typed (a built-in one kept as JSON), the built-in
    kinds, and the client-run tools flattened (a namespace's members as NAMESPACE__TOOL)."""
    typed: list[Any] = []
    builtin: list[str] = []
    flat: list[FlatTool] = []
    for i, raw in enumerate(raws):
        kind = type_of(raw)
        decoder = _TOOLS.get(kind) if isinstance(kind, str) else None
        if decoder is not None:
            tool = decode_sub(raw, decoder, f"{where}[{i}]")
            typed.append(tool)
            if isinstance(tool, NamespaceTool):
                flat += _members(tool, f"{where}[{i}]")
            else:
                flat.append(FlatTool(tool.name, tool.name, tool.name, None, tool, f"{where}[{i}]"))
        elif isinstance(kind, str) and kind in BUILTIN_TOOLS:
            builtin.append(kind)
            typed.append(raw)
        else:
            raise Refusal(Reason.invalid_field, f"Invalid value at {where}[{i}].type: unsupported tool type"
                          f" {str(kind)[:64]!r}", param=f"{where}[{i}].type")
    return typed, builtin, flat


def _members(namespace: NamespaceTool, where: str) -> list[FlatTool]:
    out = []
    members: list[Any] = []
    for j, raw in enumerate(namespace.tools):
        kind = type_of(raw)
        if kind not in ("function", "custom"):
            raise Refusal(Reason.invalid_field, f"Invalid value at {where}.tools[{j}].type: a namespace holds "
                          "function and custom tools", param=f"{where}.tools[{j}].type")
        member = decode_sub(raw, _TOOLS[str(kind)], f"{where}.tools[{j}]")
        members.append(member)
        out.append(FlatTool(f"{namespace.name}__{member.name}", f"{namespace.name}.{member.name}", member.name,
                            namespace.name, member, f"{where}.tools[{j}]"))
    namespace.tools = members       # typed, for the render
    return out


def _no_clash(flat: list[FlatTool]) -> None:
    """Two tools that a chat backend would see under one name are refused, naming both."""
    seen: dict[str, FlatTool] = {}
    for tool in flat:
        other = seen.get(tool.chat_name)
        if other is not None:
            raise Refusal(Reason.invalid_field, f"the tools `{other.entitled}` and `{tool.entitled}` would both be "
                          f"named `{tool.chat_name}` for a chat backend; rename one", param="tools")
        seen[tool.chat_name] = tool


def allowed_names(choice: AllowedToolsChoice) -> set[str]:
    """The client-run tools an ``allowed_tools`` choice names (others are server tools)."""
    names = set()
    for i, raw in enumerate(choice.tools):
        if type_of(raw) in ("function", "custom"):
            names.add(decode_sub(raw, _ALLOWED, f"tool_choice.tools[{i}]").name)
    return names


def _no_logprobs(content: list[Any]) -> None:
    for part in content:
        if isinstance(part, OutputText) and part.logprobs is not UNSET:
            part.logprobs = UNSET   # an earlier answer's log probabilities: not input
