"""Strict Structs for ``POST /v1/responses`` (OpenAI's Responses API).

Shapes follow the official ``openai`` package (``openai.types.responses``): the request
body of ``client.responses.create``. Every Struct forbids unknown fields. Two lists are
free-form in the API, their elements told apart by ``type`` (and an input message may
omit its ``type``): ``input`` items and ``tools``. They are decoded as ``Raw`` here and
each element strictly by ``parse``, with errors naming ``input[3].content[0].text``.

Built-in tools (web search, file search, code interpreter, ...), ``conversation`` and
``prompt`` run on OpenAI's side: they are kept as raw bytes for native forwarding and
listed as ``Unsupported`` for translation (``responses_translate``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

import msgspec
from msgspec import UNSET, Meta, Raw, UnsetType

from ..errors import Reason, Refusal
from ..validation.bounded import decode_request
from ..validation.schemas import Identifier, Opt, ShortText, Strict, ToolName
from .common import decode_sub, type_of

PositiveInt = Annotated[int, Meta(ge=1)]
Detail = Union[Literal["auto", "low", "high", "original"], UnsetType]
Metadata = Annotated[dict[Annotated[str, Meta(max_length=64)], Annotated[str, Meta(max_length=512)]],
                     Meta(max_length=16)]

# -- content parts -------------------------------------------------------------------


class InputText(Strict, tag_field="type", tag="input_text", kw_only=True):
    text: str


class InputImage(Strict, tag_field="type", tag="input_image", kw_only=True):
    image_url: Opt[str] = UNSET
    file_id: Opt[Identifier] = UNSET
    detail: Detail = UNSET


class InputFile(Strict, tag_field="type", tag="input_file", kw_only=True):
    file_data: Opt[str] = UNSET
    file_id: Opt[Identifier] = UNSET
    file_url: Opt[str] = UNSET
    filename: Opt[ShortText] = UNSET


class OutputText(Strict, tag_field="type", tag="output_text", kw_only=True):
    text: str
    annotations: Union[list[Raw], UnsetType] = UNSET
    logprobs: Union[list[Raw], UnsetType] = UNSET


class RefusalContent(Strict, tag_field="type", tag="refusal", kw_only=True):
    refusal: str


Part = Union[InputText, InputImage, InputFile, OutputText, RefusalContent]
ToolOutputPart = Union[InputText, InputImage, InputFile]

# -- input items ---------------------------------------------------------------------


class MessageItem(Strict, kw_only=True):
    """An input message; ``type: "message"`` may be omitted (EasyInputMessage)."""

    type: Union[Literal["message"], UnsetType] = UNSET
    role: Literal["user", "assistant", "system", "developer"]
    content: Union[str, list[Part]]
    id: Union[Identifier, UnsetType] = UNSET
    status: Union[Literal["in_progress", "completed", "incomplete"], UnsetType] = UNSET
    phase: Opt[Literal["commentary", "final_answer"]] = UNSET


class FunctionCallItem(Strict, kw_only=True):
    type: Literal["function_call"]
    call_id: Identifier
    name: ToolName
    arguments: str
    id: Union[Identifier, UnsetType] = UNSET
    status: Union[Literal["in_progress", "completed", "incomplete"], UnsetType] = UNSET


class FunctionCallOutputItem(Strict, kw_only=True):
    type: Literal["function_call_output"]
    call_id: Identifier
    output: Union[str, list[ToolOutputPart]]
    id: Opt[Identifier] = UNSET
    status: Opt[Literal["in_progress", "completed", "incomplete"]] = UNSET


class ReasoningItem(Strict, kw_only=True):
    """Reasoning a previous answer returned, sent back by agents (Codex does)."""

    type: Literal["reasoning"]
    id: Union[Identifier, UnsetType] = UNSET
    summary: list[Raw]
    content: Opt[list[Raw]] = UNSET
    encrypted_content: Opt[str] = UNSET
    status: Union[Literal["in_progress", "completed", "incomplete"], UnsetType] = UNSET


class ItemReference(Strict, kw_only=True):
    type: Literal["item_reference"]
    id: Identifier


InputItem = Union[MessageItem, FunctionCallItem, FunctionCallOutputItem, ReasoningItem, ItemReference]

# -- tools, text format, reasoning ---------------------------------------------------


class FunctionTool(Strict, kw_only=True):
    type: Literal["function"]
    name: ToolName
    description: Opt[str] = UNSET
    parameters: Union[Raw, UnsetType] = UNSET   # a JSON schema, or null
    strict: Opt[bool] = UNSET


class FunctionChoice(Strict, tag_field="type", tag="function", kw_only=True):
    name: ToolName


class AllowedToolRef(Strict, kw_only=True):
    type: Literal["function"]
    name: ToolName


class AllowedToolsChoice(Strict, tag_field="type", tag="allowed_tools", kw_only=True):
    mode: Literal["auto", "required"]
    tools: Annotated[list[AllowedToolRef], Meta(min_length=1)]


ToolChoice = Union[Literal["none", "auto", "required"], FunctionChoice, AllowedToolsChoice]


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


class Reasoning(Strict, kw_only=True):
    effort: Opt[Literal["none", "minimal", "low", "medium", "high", "xhigh"]] = UNSET
    summary: Opt[Literal["auto", "concise", "detailed"]] = UNSET
    generate_summary: Opt[Literal["auto", "concise", "detailed"]] = UNSET


class StreamOptions(Strict, kw_only=True):
    include_obfuscation: Opt[bool] = UNSET


# -- the request ---------------------------------------------------------------------


class ResponsesRequest(Strict, kw_only=True):
    model: Identifier
    input: Union[str, list[Raw], UnsetType] = UNSET
    instructions: Opt[str] = UNSET
    max_output_tokens: Opt[PositiveInt] = UNSET
    tools: Opt[list[Raw]] = UNSET
    tool_choice: Opt[ToolChoice] = UNSET
    parallel_tool_calls: Opt[bool] = UNSET
    max_tool_calls: Opt[PositiveInt] = UNSET
    temperature: Opt[Annotated[float, Meta(ge=0.0, le=2.0)]] = UNSET
    top_p: Opt[Annotated[float, Meta(ge=0.0, le=1.0)]] = UNSET
    top_logprobs: Opt[Annotated[int, Meta(ge=0, le=20)]] = UNSET
    stream: Opt[bool] = UNSET
    stream_options: Opt[StreamOptions] = UNSET
    store: Opt[bool] = UNSET
    previous_response_id: Opt[Identifier] = UNSET
    conversation: Union[Raw, UnsetType] = UNSET
    prompt: Union[Raw, UnsetType] = UNSET
    background: Opt[bool] = UNSET
    metadata: Opt[Metadata] = UNSET
    user: Opt[ShortText] = UNSET
    safety_identifier: Opt[ShortText] = UNSET
    prompt_cache_key: Opt[ShortText] = UNSET
    prompt_cache_retention: Opt[Literal["in-memory", "24h"]] = UNSET
    service_tier: Opt[Literal["auto", "default", "flex", "scale", "priority"]] = UNSET
    text: Opt[TextConfig] = UNSET
    reasoning: Opt[Reasoning] = UNSET
    truncation: Opt[Literal["auto", "disabled"]] = UNSET
    include: Opt[list[Annotated[str, Meta(max_length=64)]]] = UNSET


# Built-in tools: run by OpenAI, so only an upstream serving responses natively has them.
BUILTIN_TOOLS = frozenset({
    "web_search", "web_search_preview", "web_search_2025_08_26", "web_search_preview_2025_03_11",
    "file_search", "computer", "computer_use_preview", "code_interpreter", "image_generation",
    "mcp", "local_shell", "shell", "apply_patch", "custom", "namespace", "tool_search",
})


class Parsed(msgspec.Struct, kw_only=True):
    """A Responses request: its top level, its items and tools decoded strictly."""

    request: ResponsesRequest
    items: list[InputItem]
    functions: list[FunctionTool]
    builtin_tools: list[str]      # the ``type`` of each built-in tool, in order


_REQUEST = msgspec.json.Decoder(ResponsesRequest)
_ITEMS: dict[str, msgspec.json.Decoder[Any]] = {
    "message": msgspec.json.Decoder(MessageItem),
    "function_call": msgspec.json.Decoder(FunctionCallItem),
    "function_call_output": msgspec.json.Decoder(FunctionCallOutputItem),
    "reasoning": msgspec.json.Decoder(ReasoningItem),
    "item_reference": msgspec.json.Decoder(ItemReference),
}
_FUNCTION = msgspec.json.Decoder(FunctionTool)


def parse(body: bytes) -> Parsed:
    """The body as a ``Parsed`` request, or a ``Refusal`` (unknown field, bad value, ...)."""
    req = decode_request(body, _REQUEST)
    if req.input is UNSET and req.prompt is UNSET:
        raise Refusal(Reason.invalid_field, "Missing required parameter: input", param="input")
    items: list[InputItem] = []
    for i, raw in enumerate(req.input if isinstance(req.input, list) else ()):
        kind = type_of(raw, "message")
        decoder = _ITEMS.get(kind) if isinstance(kind, str) else None
        if decoder is None:
            raise Refusal(Reason.invalid_field, f"Invalid value at input[{i}].type: unsupported item type"
                          f" {str(kind)[:64]!r}", param=f"input[{i}].type")
        items.append(decode_sub(raw, decoder, f"input[{i}]"))
    functions: list[FunctionTool] = []
    builtin: list[str] = []
    for i, raw in enumerate(req.tools or ()):
        kind = type_of(raw)
        if kind == "function":
            functions.append(decode_sub(raw, _FUNCTION, f"tools[{i}]"))
        elif isinstance(kind, str) and kind in BUILTIN_TOOLS:
            builtin.append(kind)
        else:
            raise Refusal(Reason.invalid_field, f"Invalid value at tools[{i}].type: unsupported tool type"
                          f" {str(kind)[:64]!r}", param=f"tools[{i}].type")
    return Parsed(request=req, items=items, functions=functions, builtin_tools=builtin)
