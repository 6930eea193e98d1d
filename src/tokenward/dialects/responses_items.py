"""The content parts and input items of a Responses request: messages and their parts, tool
calls and their outputs, reasoning, compaction, references, and the kinds of item only a
native upstream reads (``SERVER_ITEMS``).

Part of the Responses schema (responses_schema.py, whose docstring says how each field is
classed).
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

import msgspec
from msgspec import UNSET, Meta, Raw, UnsetType

from ..validation.schemas import Opt, ShortText, Strict, ToolName
from .common import Opaque, StateId

Detail = Union[Literal["auto", "low", "high", "original"], None, UnsetType]
Status = Opt[Literal["in_progress", "completed", "incomplete"]]

# -- content parts -------------------------------------------------------------------


class CacheBreakpoint(Strict, kw_only=True):
    mode: Literal["explicit"]
    ttl: Union[Literal["30m", "12h"], UnsetType] = UNSET


Breakpoint = Opt[CacheBreakpoint]


class InputText(Strict, tag_field="type", tag="input_text", kw_only=True):
    text: str
    prompt_cache_breakpoint: Breakpoint = UNSET


class InputImage(Strict, tag_field="type", tag="input_image", kw_only=True):
    image_url: Opt[str] = UNSET
    file_id: Opt[StateId] = UNSET
    detail: Detail = UNSET
    prompt_cache_breakpoint: Breakpoint = UNSET


class InputFile(Strict, tag_field="type", tag="input_file", kw_only=True):
    file_data: Opt[str] = UNSET
    file_id: Opt[StateId] = UNSET
    file_url: Opt[str] = UNSET
    filename: Opt[ShortText] = UNSET
    detail: Union[Literal["auto", "low", "high"], UnsetType] = UNSET
    prompt_cache_breakpoint: Breakpoint = UNSET


class FileCitation(Strict, tag_field="type", tag="file_citation", kw_only=True):
    file_id: StateId
    filename: str
    index: Annotated[int, Meta(ge=0)]


class UrlCitation(Strict, tag_field="type", tag="url_citation", kw_only=True):
    start_index: Annotated[int, Meta(ge=0)]
    end_index: Annotated[int, Meta(ge=0)]
    title: str
    url: str


class ContainerFileCitation(Strict, tag_field="type", tag="container_file_citation", kw_only=True):
    container_id: StateId
    file_id: StateId
    filename: str
    start_index: Annotated[int, Meta(ge=0)]
    end_index: Annotated[int, Meta(ge=0)]


class FilePath(Strict, tag_field="type", tag="file_path", kw_only=True):
    file_id: StateId
    index: Annotated[int, Meta(ge=0)]


Annotation = Union[FileCitation, UrlCitation, ContainerFileCitation, FilePath]


class OutputText(Strict, tag_field="type", tag="output_text", kw_only=True):
    text: str
    annotations: Union[list[Annotation], UnsetType] = UNSET
    # the log probabilities of an earlier answer: never input to a model, dropped (parse)
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
    id: Union[StateId, UnsetType] = UNSET
    status: Status = UNSET
    phase: Opt[Literal["commentary", "final_answer"]] = UNSET


class DirectCaller(Strict, tag_field="type", tag="direct", kw_only=True):
    pass


class ProgramCaller(Strict, tag_field="type", tag="program", kw_only=True):
    caller_id: StateId


Caller = Opt[Union[DirectCaller, ProgramCaller]]


class FunctionCallItem(Strict, kw_only=True):
    type: Literal["function_call"]
    call_id: StateId
    name: ToolName
    arguments: str
    id: Union[StateId, UnsetType] = UNSET
    status: Status = UNSET
    caller: Caller = UNSET
    namespace: Union[ToolName, UnsetType] = UNSET
    async_: Union[bool, UnsetType] = msgspec.field(name="async", default=UNSET)


class FunctionCallOutputItem(Strict, kw_only=True):
    type: Literal["function_call_output"]
    call_id: Opt[StateId] = UNSET
    output: Union[str, list[ToolOutputPart]]
    id: Opt[StateId] = UNSET
    status: Status = UNSET
    caller: Caller = UNSET
    name: Opt[ToolName] = UNSET
    namespace: Opt[ToolName] = UNSET


class SummaryText(Strict, tag_field="type", tag="summary_text", kw_only=True):
    text: str


class ReasoningText(Strict, tag_field="type", tag="reasoning_text", kw_only=True):
    text: str


class ReasoningItem(Strict, kw_only=True):
    """Reasoning a previous answer returned, sent back by agents (Codex does)."""

    type: Literal["reasoning"]
    id: Union[StateId, UnsetType] = UNSET
    summary: list[SummaryText]
    content: Opt[list[ReasoningText]] = UNSET
    encrypted_content: Opt[Opaque] = UNSET
    status: Status = UNSET


class CustomToolCallItem(Strict, kw_only=True):
    """A call of a client-run custom tool (free-form input, e.g. a patch)."""

    type: Literal["custom_tool_call"]
    call_id: StateId
    name: ToolName
    input: str
    id: Union[StateId, UnsetType] = UNSET
    caller: Caller = UNSET
    namespace: Union[ToolName, UnsetType] = UNSET
    async_: Union[bool, UnsetType] = msgspec.field(name="async", default=UNSET)


class CustomToolCallOutputItem(Strict, kw_only=True):
    type: Literal["custom_tool_call_output"]
    call_id: StateId
    output: Union[str, list[ToolOutputPart]]
    id: Union[StateId, UnsetType] = UNSET
    caller: Caller = UNSET


class CompactionItem(Strict, kw_only=True):
    """An earlier context, compacted and encrypted by the upstream: opaque state."""

    type: Literal["compaction"]
    encrypted_content: Opaque
    id: Opt[StateId] = UNSET


class ItemReference(Strict, kw_only=True):
    type: Opt[Literal["item_reference"]] = UNSET
    id: StateId



# Items of tools the upstream runs (or that only it understands): kept as their JSON,
# screened as JSON text, forwarded to an upstream that serves the API natively only.
SERVER_ITEMS = frozenset({
    "file_search_call", "computer_call", "computer_call_output", "web_search_call", "image_generation_call",
    "code_interpreter_call", "local_shell_call", "local_shell_call_output", "shell_call", "shell_call_output",
    "apply_patch_call", "apply_patch_call_output", "mcp_list_tools", "mcp_approval_request",
    "mcp_approval_response", "mcp_call", "tool_search_call", "tool_search_output", "program", "program_output",
    "compaction_trigger", "configuration_update",
})
