"""The content blocks of an Anthropic Messages request: text, images, documents, search
results, thinking, tool use and results, and the blocks of tools the upstream runs.

Part of the Messages schema (messages_schema.py, whose docstring says how each field is
classed): blocks are told apart by ``type``; a server-side block (``ServerBlock``) keeps
every field but ``type`` and ``cache_control`` as free-form JSON, screened as JSON text.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

import msgspec
from msgspec import UNSET, Meta, Raw, UnsetType

from ..validation.schemas import ShortText, Strict, ToolName
from .common import Opaque, StateId


class CacheControl(Strict, kw_only=True):
    type: Literal["ephemeral"]
    ttl: Union[Literal["5m", "1h"], UnsetType] = UNSET


CC = Union[CacheControl, None, UnsetType]
Title = Union[str, None, UnsetType]

# -- citations ---------------------------------------------------------------------


class CharLocation(Strict, tag_field="type", tag="char_location", kw_only=True):
    cited_text: str
    document_index: Annotated[int, Meta(ge=0)]
    document_title: Title = UNSET
    start_char_index: Annotated[int, Meta(ge=0)]
    end_char_index: Annotated[int, Meta(ge=0)]


class PageLocation(Strict, tag_field="type", tag="page_location", kw_only=True):
    cited_text: str
    document_index: Annotated[int, Meta(ge=0)]
    document_title: Title = UNSET
    start_page_number: Annotated[int, Meta(ge=0)]
    end_page_number: Annotated[int, Meta(ge=0)]


class BlockLocation(Strict, tag_field="type", tag="content_block_location", kw_only=True):
    cited_text: str
    document_index: Annotated[int, Meta(ge=0)]
    document_title: Title = UNSET
    start_block_index: Annotated[int, Meta(ge=0)]
    end_block_index: Annotated[int, Meta(ge=0)]


class WebResultLocation(Strict, tag_field="type", tag="web_search_result_location", kw_only=True):
    cited_text: str
    encrypted_index: Opaque
    title: Title = UNSET
    url: str


class SearchResultLocation(Strict, tag_field="type", tag="search_result_location", kw_only=True):
    cited_text: str
    source: str
    title: Title = UNSET
    search_result_index: Annotated[int, Meta(ge=0)]
    start_block_index: Annotated[int, Meta(ge=0)]
    end_block_index: Annotated[int, Meta(ge=0)]


Citation = Union[CharLocation, PageLocation, BlockLocation, WebResultLocation, SearchResultLocation]


class CitationsConfig(Strict, kw_only=True):
    enabled: Union[bool, UnsetType] = UNSET


# -- sources -----------------------------------------------------------------------


class Base64Image(Strict, tag_field="type", tag="base64", kw_only=True):
    media_type: Literal["image/jpeg", "image/png", "image/gif", "image/webp"]
    data: str


class UrlSource(Strict, tag_field="type", tag="url", kw_only=True):
    url: str


class FileSource(Strict, tag_field="type", tag="file", kw_only=True):
    file_id: StateId


class Base64Pdf(Strict, tag_field="type", tag="base64", kw_only=True):
    media_type: Literal["application/pdf"]
    data: str


class PlainTextSource(Strict, tag_field="type", tag="text", kw_only=True):
    media_type: Literal["text/plain"]
    data: str


# -- content blocks ------------------------------------------------------------------


class TextBlock(Strict, tag_field="type", tag="text", kw_only=True):
    text: str
    cache_control: CC = UNSET
    citations: Union[list[Citation], None, UnsetType] = UNSET


class ImageTransformations(Strict, kw_only=True):
    oversized_image: Union[Literal["downsize", "error"], UnsetType] = UNSET


class ImageBlock(Strict, tag_field="type", tag="image", kw_only=True):
    source: Union[Base64Image, UrlSource, FileSource]
    cache_control: CC = UNSET
    transformations: Union[ImageTransformations, None, UnsetType] = UNSET


class ContentSource(Strict, tag_field="type", tag="content", kw_only=True):
    content: Union[str, list[Union[TextBlock, ImageBlock]]]


class DocumentBlock(Strict, tag_field="type", tag="document", kw_only=True):
    source: Union[Base64Pdf, PlainTextSource, ContentSource, UrlSource, FileSource]
    title: Title = UNSET
    context: Title = UNSET
    citations: Union[CitationsConfig, None, UnsetType] = UNSET
    cache_control: CC = UNSET


class SearchResultBlock(Strict, tag_field="type", tag="search_result", kw_only=True):
    source: str
    title: str
    content: list[TextBlock]
    citations: Union[CitationsConfig, UnsetType] = UNSET
    cache_control: CC = UNSET


class ThinkingBlock(Strict, tag_field="type", tag="thinking", kw_only=True):
    thinking: str
    signature: Opaque


class RedactedThinkingBlock(Strict, tag_field="type", tag="redacted_thinking", kw_only=True):
    data: Opaque


class DirectCaller(Strict, tag_field="type", tag="direct", kw_only=True):
    pass


class CodeExecutionCaller(Strict, tag_field="type", tag="code_execution_20250825", kw_only=True):
    tool_id: StateId


class CodeExecutionCaller2(Strict, tag_field="type", tag="code_execution_20260120", kw_only=True):
    tool_id: StateId


Caller = Union[DirectCaller, CodeExecutionCaller, CodeExecutionCaller2]


class ToolUseBlock(Strict, tag_field="type", tag="tool_use", kw_only=True):
    id: StateId
    name: ToolName
    input: Raw            # a JSON object (checked by the translation): screened as JSON text
    cache_control: CC = UNSET
    caller: Union[Caller, UnsetType] = UNSET
    toolset_name: Union[ShortText, None, UnsetType] = UNSET


class ToolReferenceBlock(Strict, tag_field="type", tag="tool_reference", kw_only=True):
    tool_name: ToolName
    cache_control: CC = UNSET


class ServerBlock(Strict, kw_only=True):
    """A block that runs on, or comes from, the upstream (module docstring): every field
    but ``type`` and ``cache_control`` is free-form JSON, screened as JSON text."""

    cache_control: CC = UNSET


class BrowserState(ServerBlock, tag_field="type", tag="browser_state", kw_only=True):
    tabs: Raw
    state_changes: Union[Raw, UnsetType] = UNSET


ToolResultPart = Union[TextBlock, ImageBlock, SearchResultBlock, DocumentBlock, ToolReferenceBlock, BrowserState]


class ToolResultBlock(Strict, tag_field="type", tag="tool_result", kw_only=True):
    tool_use_id: StateId
    content: Union[str, list[ToolResultPart], UnsetType] = UNSET
    is_error: Union[bool, UnsetType] = UNSET
    cache_control: CC = UNSET
    toolset_name: Union[ShortText, None, UnsetType] = UNSET


class ServerToolUse(ServerBlock, tag_field="type", tag="server_tool_use", kw_only=True):
    id: Raw
    name: Raw
    input: Raw
    caller: Union[Raw, UnsetType] = UNSET


class _ServerResult(ServerBlock, kw_only=True):
    tool_use_id: Raw
    content: Raw


class WebSearchResult(_ServerResult, tag_field="type", tag="web_search_tool_result", kw_only=True):
    caller: Union[Raw, UnsetType] = UNSET


class WebFetchResult(_ServerResult, tag_field="type", tag="web_fetch_tool_result", kw_only=True):
    caller: Union[Raw, UnsetType] = UNSET


class AdvisorResult(_ServerResult, tag_field="type", tag="advisor_tool_result", kw_only=True):
    pass


class CodeExecutionResult(_ServerResult, tag_field="type", tag="code_execution_tool_result", kw_only=True):
    pass


class BashExecutionResult(_ServerResult, tag_field="type", tag="bash_code_execution_tool_result", kw_only=True):
    pass


class EditorExecutionResult(_ServerResult, tag_field="type", tag="text_editor_code_execution_tool_result",
                            kw_only=True):
    pass


class ToolSearchResult(_ServerResult, tag_field="type", tag="tool_search_tool_result", kw_only=True):
    pass


class McpToolUse(ServerBlock, tag_field="type", tag="mcp_tool_use", kw_only=True):
    id: Raw
    name: Raw
    server_name: Raw
    input: Raw


class McpToolResult(ServerBlock, tag_field="type", tag="mcp_tool_result", kw_only=True):
    tool_use_id: Raw
    content: Union[Raw, UnsetType] = UNSET
    is_error: Union[Raw, UnsetType] = UNSET


class McpToolListing(ServerBlock, tag_field="type", tag="mcp_tool_listing", kw_only=True):
    mcp_server_name: Raw
    tools: Raw


class Compaction(ServerBlock, tag_field="type", tag="compaction", kw_only=True):
    content: Union[Raw, UnsetType] = UNSET
    encrypted_content: Union[Raw, UnsetType] = UNSET
    signature: Union[Raw, UnsetType] = UNSET
    tool_changes: Union[Raw, UnsetType] = UNSET


class Fallback(ServerBlock, tag_field="type", tag="fallback", kw_only=True):
    from_: Raw = msgspec.field(name="from")
    to: Raw
    trigger: Union[Raw, UnsetType] = UNSET


# Refused by a rule (RULES): a file kept at Anthropic; tool set changes inside messages
class ContainerUpload(Strict, tag_field="type", tag="container_upload", kw_only=True):
    file_id: StateId
    cache_control: CC = UNSET


class ToolAddition(Strict, tag_field="type", tag="tool_addition", kw_only=True):
    tool: Raw
    cache_control: CC = UNSET


class ToolRemoval(Strict, tag_field="type", tag="tool_removal", kw_only=True):
    tool: Raw
    cache_control: CC = UNSET


SERVER_BLOCKS = (ServerToolUse, WebSearchResult, WebFetchResult, AdvisorResult, CodeExecutionResult,
                 BashExecutionResult, EditorExecutionResult, ToolSearchResult, McpToolUse, McpToolResult,
                 McpToolListing, Compaction, Fallback)

Block = Union[TextBlock, ImageBlock, DocumentBlock, SearchResultBlock, ThinkingBlock, RedactedThinkingBlock,
              ToolUseBlock, ToolResultBlock, ServerToolUse, WebSearchResult, WebFetchResult, AdvisorResult,
              CodeExecutionResult, BashExecutionResult, EditorExecutionResult, ToolSearchResult, McpToolUse,
              McpToolResult, McpToolListing, Compaction, Fallback, ContainerUpload, ToolAddition, ToolRemoval]
