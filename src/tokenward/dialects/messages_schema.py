"""Strict Structs for ``POST /v1/messages`` and ``/v1/messages/count_tokens`` (Anthropic).

Shapes follow the official ``anthropic`` package's request types, beta ones included
(``anthropic.types.beta.message_create_params``), pinned in the test extra; a test walks
them (tests/dialects/test_sdk_coverage.py). Every field they define is one of:

- **text** a model reads (or the backend receives): screened, masked, counted
  (dialects/messages_doc.py lists them);
- **structure**: validated here (enums, numbers, ids: no spaces, no ``@``);
- **opaque** state the API issues (``signature``, ``redacted_thinking.data``,
  ``encrypted_*``): only as base64, bounded in size, never masked, counted as bytes;
- **server side**: blocks and tools that run on, or come from, the upstream (web search
  results, code execution, MCP): kept as free-form JSON, screened as JSON text, forwarded
  only to an upstream that serves the API natively;
- **refused** or **dropped** by a rule (``RULES``, docs/dialects.md).

Nothing else passes: an unknown field anywhere is ``unknown_field``. Content blocks are
told apart by ``type``; ``tools`` is decoded element by element (a client tool may omit
``type``).
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, Literal, Union

import msgspec
from msgspec import UNSET, Meta, Raw, UnsetType

from ..errors import Reason, Refusal
from ..validation.bounded import decode_request
from ..validation.schemas import ShortText, Strict, ToolName
from .common import StateId, decode_sub, type_of
from .messages_blocks import (
    DocumentBlock,
    ImageBlock,
    Block,
    CC,
    ContainerUpload,
    FileSource,
    TextBlock,
    ToolAddition,
    ToolRemoval,
)

Opt = Union[Any, None, UnsetType]


class SystemOutputConfig(Strict, kw_only=True):
    effort: Union[Literal["low", "medium", "high", "xhigh", "max"], None, UnsetType] = UNSET


class Message(Strict, kw_only=True):
    """A turn. ``system`` turns inside ``messages`` (Claude Code sends one) hold text
    blocks only, and alone may carry ``clear_at`` and ``output_config``."""

    role: Literal["user", "assistant", "system"]
    content: Union[str, list[Block]] = ""    # required but on a system turn (checked)
    clear_at: Union[Literal["next_user_message", "never"], None, UnsetType] = UNSET
    output_config: Union[SystemOutputConfig, None, UnsetType] = UNSET



# -- tools, tool choice, thinking, output ----------------------------------------------

Callers = list[Literal["direct", "code_execution_20250825", "code_execution_20260120", "code_execution_20260521"]]


class ClientTool(Strict, kw_only=True):
    type: Union[Literal["custom"], None, UnsetType] = UNSET
    name: ToolName
    description: Union[str, UnsetType] = UNSET
    input_schema: Raw
    cache_control: CC = UNSET
    strict: Union[bool, UnsetType] = UNSET
    eager_input_streaming: Union[bool, None, UnsetType] = UNSET
    defer_loading: Union[bool, UnsetType] = UNSET
    allowed_callers: Union[Callers, UnsetType] = UNSET
    input_examples: Union[Raw, UnsetType] = UNSET     # a list of example inputs: JSON text


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


class BlockBinding(Strict, kw_only=True):
    prefix_mismatch_behavior: Union[Literal["error", "drop_block"], None, UnsetType] = UNSET


Display = Union[Literal["summarized", "omitted", "updates"], None, UnsetType]


class ThinkingEnabled(Strict, tag_field="type", tag="enabled", kw_only=True):
    budget_tokens: Annotated[int, Meta(ge=1024)]
    display: Display = UNSET
    block_binding: Union[BlockBinding, None, UnsetType] = UNSET


class ThinkingDisabled(Strict, tag_field="type", tag="disabled", kw_only=True):
    pass


class ThinkingAdaptive(Strict, tag_field="type", tag="adaptive", kw_only=True):
    display: Display = UNSET
    block_binding: Union[BlockBinding, None, UnsetType] = UNSET


class ThinkingBetweenTools(Strict, tag_field="type", tag="between_tools", kw_only=True):
    pass


Thinking = Union[ThinkingEnabled, ThinkingDisabled, ThinkingAdaptive, ThinkingBetweenTools]


class Metadata(Strict, kw_only=True):
    user_id: Union[Annotated[str, Meta(max_length=256)], None, UnsetType] = UNSET


class JsonOutputFormat(Strict, tag_field="type", tag="json_schema", kw_only=True):
    schema: Raw


class TaskBudget(Strict, tag_field="type", tag="tokens", kw_only=True):
    total: Annotated[int, Meta(ge=0)]
    remaining: Union[Annotated[int, Meta(ge=0)], None, UnsetType] = UNSET


Effort = Literal["low", "medium", "high", "xhigh", "max"]


class OutputConfig(Strict, kw_only=True):
    effort: Union[Effort, None, UnsetType] = UNSET
    format: Union[JsonOutputFormat, None, UnsetType] = UNSET
    task_budget: Union[TaskBudget, None, UnsetType] = UNSET


class ContextManagement(Strict, kw_only=True):
    """Anthropic's context editing (clearing old thinking or tool uses, compaction): each
    edit kept as JSON text (a compaction edit carries instructions the model reads)."""

    edits: Union[list[Raw], UnsetType] = UNSET


class CompactionConfig(Strict, tag_field="type", tag="summarize", kw_only=True):
    instructions: Union[str, None, UnsetType] = UNSET


class Skill(Strict, kw_only=True):
    skill_id: StateId
    type: Literal["anthropic", "custom"]
    version: Union[ShortText, UnsetType] = UNSET


class ContainerParams(Strict, kw_only=True):
    id: Union[StateId, None, UnsetType] = UNSET
    skills: Union[list[Skill], None, UnsetType] = UNSET


class ThreadCreate(Strict, tag_field="type", tag="create", kw_only=True):
    pass


class ThreadContinue(Strict, tag_field="type", tag="continue", kw_only=True):
    previous_message_id: StateId


class Diagnostics(Strict, kw_only=True):
    previous_message_id: Union[StateId, None, UnsetType] = UNSET


# -- the requests --------------------------------------------------------------------


class CountTokensRequest(Strict, kw_only=True):
    model: ShortText
    messages: Annotated[list[Message], Meta(min_length=1)]
    system: Union[str, list[TextBlock], UnsetType] = UNSET
    tools: Union[list[Raw], UnsetType] = UNSET
    tool_choice: Union[ToolChoice, UnsetType] = UNSET
    thinking: Union[Thinking, UnsetType] = UNSET
    output_config: Union[OutputConfig, UnsetType] = UNSET
    context_management: Union[ContextManagement, None, UnsetType] = UNSET
    mcp_servers: Union[list[Raw], UnsetType] = UNSET
    cache_control: CC = UNSET
    speed: Union[Literal["standard", "fast"], None, UnsetType] = UNSET


class MessagesRequest(CountTokensRequest, kw_only=True):
    max_tokens: Annotated[int, Meta(ge=1)]
    stop_sequences: Union[list[Annotated[str, Meta(min_length=1)]], UnsetType] = UNSET
    temperature: Union[Annotated[float, Meta(ge=0.0, le=1.0)], UnsetType] = UNSET
    top_p: Union[Annotated[float, Meta(ge=0.0, le=1.0)], UnsetType] = UNSET
    top_k: Union[Annotated[int, Meta(ge=0)], UnsetType] = UNSET
    stream: Union[bool, UnsetType] = UNSET
    metadata: Union[Metadata, UnsetType] = UNSET
    service_tier: Union[Literal["auto", "standard_only"], UnsetType] = UNSET
    container: Union[StateId, ContainerParams, None, UnsetType] = UNSET
    inference_geo: Union[ShortText, None, UnsetType] = UNSET
    compaction: Union[CompactionConfig, None, UnsetType] = UNSET
    # refused or dropped by a rule (RULES): fields about Anthropic's accounts and state
    thread: Union[ThreadCreate, ThreadContinue, None, UnsetType] = UNSET
    diagnostics: Union[Diagnostics, None, UnsetType] = UNSET
    fallbacks: Union[Raw, UnsetType] = UNSET
    fallback_credit_token: Union[Raw, UnsetType] = UNSET
    billing_policy: Union[Raw, UnsetType] = UNSET
    user_profile_id: Union[ShortText, UnsetType] = UNSET
    workspace_id: Union[ShortText, UnsetType] = UNSET


# What the gateway does with fields it does not forward as they are (docs/dialects.md):
# "refuse": invalid_field naming the field and why; "drop": removed from what is forwarded.
TOP_RULES: dict[str, tuple[str, str]] = {
    "fallbacks": ("refuse", "fallbacks name other models the gateway has not entitled or counted"),
    "fallback_credit_token": ("refuse", "fallback credit is billing at Anthropic"),
    "billing_policy": ("refuse", "a billing policy is billing at Anthropic"),
    "diagnostics": ("drop", "diagnostics refer to messages kept at Anthropic"),
    "user_profile_id": ("drop", "an Anthropic account's profile means nothing to the gateway's backends"),
    "workspace_id": ("drop", "an Anthropic workspace means nothing to the gateway's backends"),
}
_TOP_VALUES = operator.attrgetter(*TOP_RULES)    # the request's values of those fields, as a tuple
BLOCK_RULES: dict[str, str] = {
    "container_upload": "a container_upload names a file kept at Anthropic, which the gateway cannot read or screen",
    "tool_addition": "tools added inside messages cannot be entitled by the plan; send them in `tools`",
    "tool_removal": "tool changes inside messages are not supported; send the tool list in `tools`",
    "file": "a file_id names a file kept at Anthropic, which the gateway cannot read or screen",
}

# Anthropic's server tools and Anthropic-defined client tools are dated names:
# ``web_search_20250305``, ``bash_20250124``, ``text_editor_20250728``, ...; they need an
# upstream that serves the API natively (it knows their schema, or runs them).
SERVER_TOOL_PREFIXES = ("web_search_", "web_fetch_", "code_execution_", "bash_", "text_editor_",
                        "computer_", "memory_", "tool_search_tool_", "advisor_", "browser_toolset_", "mcp_toolset")


class Parsed(msgspec.Struct, kw_only=True):
    """A Messages (or count_tokens) request with its tools decoded strictly. ``tools`` keeps
    the request's order: a ``ClientTool``, or a server tool as its raw JSON."""

    request: Union[MessagesRequest, CountTokensRequest]
    tools: list[ClientTool]
    server_tools: list[str]       # the ``type`` of each server tool (web_search_20250305, ...)
    all_tools: list[Union[ClientTool, Raw]] = []


_DECODERS: dict[type, msgspec.json.Decoder[Any]] = {
    MessagesRequest: msgspec.json.Decoder(MessagesRequest),
    CountTokensRequest: msgspec.json.Decoder(CountTokensRequest),
}
_TOOL = msgspec.json.Decoder(ClientTool)


def refused(param: str, why: str) -> Refusal:
    return Refusal(Reason.invalid_field, f"`{param}` is not accepted: {why}", param=param)


def parse(body: bytes, *, count_tokens: bool = False) -> Parsed:
    """The body as a ``Parsed`` request, or a ``Refusal`` naming the offending field."""
    req = decode_request(body, _DECODERS[CountTokensRequest if count_tokens else MessagesRequest])
    tools: list[ClientTool] = []
    server: list[str] = []
    every: list[Union[ClientTool, Raw]] = []
    for i, raw in enumerate(req.tools or ()):
        kind = type_of(raw, "custom")
        if kind == "custom":
            tool = decode_sub(raw, _TOOL, f"tools[{i}]")
            tools.append(tool)
            every.append(tool)
        elif isinstance(kind, str) and kind.startswith(SERVER_TOOL_PREFIXES):
            server.append(kind)
            every.append(raw)
        else:
            raise Refusal(Reason.invalid_field, f"Invalid value at tools[{i}].type: unsupported tool type"
                          f" {str(kind)[:64]!r}", param=f"tools[{i}].type")
    _apply_rules(req)
    return Parsed(request=req, tools=tools, server_tools=server, all_tools=every)


def _apply_rules(req: Union[MessagesRequest, CountTokensRequest]) -> None:
    if isinstance(req, MessagesRequest):
        values = _TOP_VALUES(req)
        # most requests set none of these: one pass in C says so
        if values.count(UNSET) + values.count(None) != len(values):
            _top_rules(req)
    for i, message in enumerate(req.messages):
        content = message.content
        if message.role != "system":
            if content == "" or message.clear_at is not UNSET or message.output_config is not UNSET:
                raise _not_as_sent(i, message)
            if isinstance(content, list):
                _block_rules(i, content, False)
        elif isinstance(content, list):
            _block_rules(i, content, True)


def _not_as_sent(i: int, message: Message) -> Refusal:
    """A user or assistant message with no content, or with what only a system message takes."""
    if message.content == "":
        return Refusal(Reason.invalid_field, f"Missing required parameter: messages[{i}].content",
                       param=f"messages[{i}].content")
    name = "clear_at" if message.clear_at is not UNSET else "output_config"
    return Refusal(Reason.invalid_field, f"Invalid value at messages[{i}].{name}: only a system message takes it",
                   param=f"messages[{i}].{name}")


def _top_rules(req: MessagesRequest) -> None:
    for field, (rule, why) in TOP_RULES.items():
        value = getattr(req, field)
        if value is UNSET or value is None:
            continue
        if rule == "refuse":
            raise refused(field, why)
        setattr(req, field, UNSET)


def _block_rules(i: int, blocks: list[Any], system: bool) -> None:
    for j, block in enumerate(blocks):
        if isinstance(block, (ContainerUpload, ToolAddition, ToolRemoval)):
            raise refused(f"messages[{i}].content[{j}]", BLOCK_RULES[block_type(block)])
        if isinstance(block, (ImageBlock, DocumentBlock)) and isinstance(block.source, FileSource):
            raise refused(f"messages[{i}].content[{j}].source.file_id", BLOCK_RULES["file"])
        if system and not isinstance(block, TextBlock):
            where = f"messages[{i}].content[{j}]"
            raise Refusal(Reason.invalid_field, f"Invalid value at {where}: a system message holds text blocks",
                          param=where)


def block_type(block: Any) -> str:
    """The ``type`` tag of a content block Struct."""
    return str(type(block).__struct_config__.tag)
