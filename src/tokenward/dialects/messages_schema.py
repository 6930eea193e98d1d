"""Strict Structs for ``POST /v1/messages`` and ``/v1/messages/count_tokens`` (Anthropic).

Shapes follow the official ``anthropic`` package (``anthropic.types.MessageCreateParams``).
Every Struct forbids unknown fields. Content blocks are told apart by ``type``; ``tools``
is decoded element by element (a client tool may omit ``type``; Anthropic's server tools
such as web search run on Anthropic's side, kept for native forwarding only).
``cache_control`` is accepted on every block (a caching hint, meaningless to a chat
backend and dropped by the translation).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

import msgspec
from msgspec import UNSET, Meta, Raw, UnsetType

from ..errors import Reason, Refusal
from ..validation.bounded import decode_request
from ..validation.schemas import Identifier, ShortText, Strict, ToolName
from .common import decode_sub, type_of



class CacheControl(Strict, kw_only=True):
    type: Literal["ephemeral"]
    ttl: Union[Literal["5m", "1h"], UnsetType] = UNSET


CC = Union[CacheControl, None, UnsetType]

# -- content blocks ------------------------------------------------------------------


class TextBlock(Strict, tag_field="type", tag="text", kw_only=True):
    text: str
    cache_control: CC = UNSET
    citations: Union[list[Raw], None, UnsetType] = UNSET


class Base64Source(Strict, tag_field="type", tag="base64", kw_only=True):
    media_type: Literal["image/jpeg", "image/png", "image/gif", "image/webp"]
    data: str


class UrlSource(Strict, tag_field="type", tag="url", kw_only=True):
    url: str


class ImageBlock(Strict, tag_field="type", tag="image", kw_only=True):
    source: Union[Base64Source, UrlSource]
    cache_control: CC = UNSET


class ToolUseBlock(Strict, tag_field="type", tag="tool_use", kw_only=True):
    id: Identifier
    name: ToolName
    input: Raw            # a JSON object: checked as one by the translation
    cache_control: CC = UNSET
    # what the SDK sends back from an answer's block (anthropic>=2.x): who called the tool,
    # the toolset it came from; accepted, not translated (a chat tool call has neither)
    caller: Union[Raw, None, UnsetType] = UNSET
    toolset_name: Union[ShortText, None, UnsetType] = UNSET


class ToolResultBlock(Strict, tag_field="type", tag="tool_result", kw_only=True):
    tool_use_id: Identifier
    content: Union[str, list[Union[TextBlock, ImageBlock]], UnsetType] = UNSET
    is_error: Union[bool, UnsetType] = UNSET
    cache_control: CC = UNSET


class ThinkingBlock(Strict, tag_field="type", tag="thinking", kw_only=True):
    thinking: str
    signature: str


class RedactedThinkingBlock(Strict, tag_field="type", tag="redacted_thinking", kw_only=True):
    data: str


Block = Union[TextBlock, ImageBlock, ToolUseBlock, ToolResultBlock, ThinkingBlock, RedactedThinkingBlock]


class Message(Strict, kw_only=True):
    role: Literal["user", "assistant"]
    content: Union[str, list[Block]]


# -- tools, tool choice, thinking ------------------------------------------------------


class ClientTool(Strict, kw_only=True):
    type: Union[Literal["custom"], UnsetType] = UNSET
    name: ToolName
    description: Union[str, UnsetType] = UNSET
    input_schema: Raw
    cache_control: CC = UNSET
    strict: Union[bool, UnsetType] = UNSET


class ChoiceAuto(Strict, tag_field="type", tag="auto", kw_only=True):
    disable_parallel_tool_use: Union[bool, UnsetType] = UNSET


class ChoiceAny(Strict, tag_field="type", tag="any", kw_only=True):
    disable_parallel_tool_use: Union[bool, UnsetType] = UNSET


class ChoiceTool(Strict, tag_field="type", tag="tool", kw_only=True):
    name: ToolName
    disable_parallel_tool_use: Union[bool, UnsetType] = UNSET


class ChoiceNone(Strict, tag_field="type", tag="none", kw_only=True):
    pass


ToolChoice = Union[ChoiceAuto, ChoiceAny, ChoiceTool, ChoiceNone]


class ThinkingEnabled(Strict, tag_field="type", tag="enabled", kw_only=True):
    budget_tokens: Annotated[int, Meta(ge=1024)]


class ThinkingDisabled(Strict, tag_field="type", tag="disabled", kw_only=True):
    pass


class ThinkingAdaptive(Strict, tag_field="type", tag="adaptive", kw_only=True):
    pass


Thinking = Union[ThinkingEnabled, ThinkingDisabled, ThinkingAdaptive]


class Metadata(Strict, kw_only=True):
    user_id: Union[Annotated[str, Meta(max_length=256)], None, UnsetType] = UNSET


# -- the requests --------------------------------------------------------------------


class CountTokensRequest(Strict, kw_only=True):
    model: Identifier
    messages: Annotated[list[Message], Meta(min_length=1)]
    system: Union[str, list[TextBlock], UnsetType] = UNSET
    tools: Union[list[Raw], UnsetType] = UNSET
    tool_choice: Union[ToolChoice, UnsetType] = UNSET
    thinking: Union[Thinking, UnsetType] = UNSET


class MessagesRequest(CountTokensRequest, kw_only=True):
    max_tokens: Annotated[int, Meta(ge=1)]
    stop_sequences: Union[list[Annotated[str, Meta(min_length=1)]], UnsetType] = UNSET
    temperature: Union[Annotated[float, Meta(ge=0.0, le=1.0)], UnsetType] = UNSET
    top_p: Union[Annotated[float, Meta(ge=0.0, le=1.0)], UnsetType] = UNSET
    top_k: Union[Annotated[int, Meta(ge=0)], UnsetType] = UNSET
    stream: Union[bool, UnsetType] = UNSET
    metadata: Union[Metadata, UnsetType] = UNSET
    service_tier: Union[Literal["auto", "standard_only"], UnsetType] = UNSET
    container: Union[ShortText, None, UnsetType] = UNSET
    mcp_servers: Union[list[Raw], UnsetType] = UNSET


class Parsed(msgspec.Struct, kw_only=True):
    """A Messages (or count_tokens) request with its tools decoded strictly."""

    request: Union[MessagesRequest, CountTokensRequest]
    tools: list[ClientTool]
    server_tools: list[str]       # the ``type`` of each server tool (web_search_20250305, ...)


_DECODERS: dict[type, msgspec.json.Decoder[Any]] = {
    MessagesRequest: msgspec.json.Decoder(MessagesRequest),
    CountTokensRequest: msgspec.json.Decoder(CountTokensRequest),
}
_TOOL = msgspec.json.Decoder(ClientTool)
# Anthropic's server and Anthropic-defined tools are dated names: ``web_search_20250305``,
# ``bash_20250124``, ``text_editor_20250728``, ``code_execution_20250825``, ...
_SERVER_TOOL_PREFIXES = ("web_search_", "web_fetch_", "code_execution_", "bash_", "text_editor_",
                         "computer_", "memory_", "tool_search_tool_")


def parse(body: bytes, *, count_tokens: bool = False) -> Parsed:
    """The body as a ``Parsed`` request, or a ``Refusal`` naming the offending field."""
    req = decode_request(body, _DECODERS[CountTokensRequest if count_tokens else MessagesRequest])
    tools: list[ClientTool] = []
    server: list[str] = []
    for i, raw in enumerate(req.tools or ()):
        kind = type_of(raw, "custom")
        if kind == "custom":
            tools.append(decode_sub(raw, _TOOL, f"tools[{i}]"))
        elif isinstance(kind, str) and kind.startswith(_SERVER_TOOL_PREFIXES):
            server.append(kind)
        else:
            raise Refusal(Reason.invalid_field, f"Invalid value at tools[{i}].type: unsupported tool type"
                          f" {str(kind)[:64]!r}", param=f"tools[{i}].type")
    return Parsed(request=req, tools=tools, server_tools=server)
