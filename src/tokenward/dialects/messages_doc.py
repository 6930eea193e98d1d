"""A Messages request forwarded natively: every text it carries, and its body rendered from the parse.

``document(parsed)`` walks the parse (dialects/messages_schema.py) and lists, in document
order, every text the backend will receive (dialects/document.py): the system prompt,
each message's text blocks joined as the model reads them, tool inputs and results,
documents, search results, citations, thinking, tool definitions, server-side blocks and
tools as JSON text, metadata. ``render`` encodes the parse again with what the stages
decided (the output bound, tools removed, a server-side system prompt, the backend's model
name) and without the signed blocks masking changed.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET

from .common import encode
from ..validation.texts import Piece
from .document import METADATA, PROMPT, TOOL_OUTPUT, Document, ReplacingPiece
from .messages_blocks import (
    BlockLocation,
    CharLocation,
    PageLocation,
    SearchResultLocation,
    SERVER_BLOCKS,
    Base64Pdf,
    BrowserState,
    ContentSource,
    DocumentBlock,
    PlainTextSource,
    RedactedThinkingBlock,
    SearchResultBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    WebResultLocation,
)
from .messages_schema import (
    CountTokensRequest,
    MessagesRequest,
    ClientTool,
    Parsed,
)


class Decisions(msgspec.Struct, frozen=True):
    """What the stages decided that a native body must say (read from the chat view)."""

    model: str | None            # the backend's name for the model (None: as the client sent it)
    max_tokens: int | None       # the output bound the reservation covers
    tools_removed: bool = False  # a restricted screening verdict took the tools away
    system_prompt: str | None = None   # the plan's system prompt replaces the caller's


def document(parsed: Parsed) -> Document:
    doc = Document()
    req = parsed.request
    system = req.system
    if isinstance(system, str):
        doc.text(req, "system", system)
    elif isinstance(system, list):
        _texts(system, PROMPT, doc, outside=False)
    for message in req.messages:
        content = message.content
        if isinstance(content, str):
            doc.text(message, "content", content)
        else:
            _blocks(content, doc)
    _tools(parsed, doc)
    _settings(req, doc)
    return doc


def _texts(blocks: list[Any], kind: str, doc: Document, outside: bool) -> None:
    """Text blocks joined as one text (the model reads them so), then their citations."""
    doc.joined([Piece(b, "text", b.text) for b in blocks if isinstance(b, TextBlock) and b.text], kind, outside)
    for block in blocks:
        if isinstance(block, TextBlock) and block.citations:
            for citation in block.citations:
                _citation(citation, doc)


def _citation(citation: Any, doc: Document) -> None:
    doc.text(citation, "cited_text", citation.cited_text, TOOL_OUTPUT, outside=True)
    if isinstance(citation, (CharLocation, PageLocation, BlockLocation)):
        doc.text(citation, "document_title", citation.document_title, TOOL_OUTPUT, outside=True)
    elif isinstance(citation, WebResultLocation):
        doc.text(citation, "title", citation.title, TOOL_OUTPUT, outside=True)
        doc.text(citation, "url", citation.url, TOOL_OUTPUT, outside=True)
        doc.opaque(citation.encrypted_index)
    elif isinstance(citation, SearchResultLocation):
        doc.text(citation, "title", citation.title, TOOL_OUTPUT, outside=True)
        doc.text(citation, "source", citation.source, TOOL_OUTPUT, outside=True)


def _blocks(blocks: list[Any], doc: Document) -> None:
    _texts(blocks, PROMPT, doc, outside=False)
    for block in blocks:
        kind = type(block)
        if kind is ThinkingBlock:
            doc.signed(block, "thinking", block.thinking)
            doc.opaque(block.signature)
        elif kind is RedactedThinkingBlock:
            doc.opaque(block.data)
        elif kind is ToolUseBlock:
            doc.json(block, "input", block.input)
            doc.text(block, "toolset_name", block.toolset_name, METADATA, outside=True)
        elif kind is ToolResultBlock:
            _tool_result(block, doc)
        elif kind is DocumentBlock:
            _document(block, doc)
        elif kind is SearchResultBlock:
            _search_result(block, doc)
        elif kind in SERVER_BLOCKS:
            _server_block(block, doc)


def _tool_result(block: ToolResultBlock, doc: Document) -> None:
    content = block.content
    if isinstance(content, str):
        doc.text(block, "content", content, TOOL_OUTPUT)
    elif isinstance(content, list):
        _texts(content, TOOL_OUTPUT, doc, outside=False)
        for inner in content:
            if isinstance(inner, DocumentBlock):
                _document(inner, doc)
            elif isinstance(inner, SearchResultBlock):
                _search_result(inner, doc)
            elif isinstance(inner, BrowserState):
                _server_block(inner, doc)
    doc.text(block, "toolset_name", block.toolset_name, METADATA, outside=True)


def _document(block: DocumentBlock, doc: Document) -> None:
    doc.text(block, "title", block.title, TOOL_OUTPUT)
    doc.text(block, "context", block.context, TOOL_OUTPUT)
    source = block.source
    if isinstance(source, PlainTextSource):
        doc.text(source, "data", source.data, TOOL_OUTPUT)
    elif isinstance(source, ContentSource):
        if isinstance(source.content, str):
            doc.text(source, "content", source.content, TOOL_OUTPUT)
        else:
            _texts(source.content, TOOL_OUTPUT, doc, outside=False)
    elif isinstance(source, Base64Pdf):
        # its text is extracted from the chat view's file part by validation: screened and,
        # when masked, sent as a plain text document instead of the file
        doc.attachments.append(lambda text: ReplacingPiece(block, "source", text, _plain_text))


def _plain_text(text: str) -> PlainTextSource:
    return PlainTextSource(media_type="text/plain", data=text)


def _search_result(block: SearchResultBlock, doc: Document) -> None:
    doc.text(block, "source", block.source, TOOL_OUTPUT)
    doc.text(block, "title", block.title, TOOL_OUTPUT)
    _texts(block.content, TOOL_OUTPUT, doc, outside=False)


def _server_block(block: Any, doc: Document) -> None:
    """A block from the upstream's own tools: every field as JSON text (messages_schema)."""
    for name, value in msgspec.structs.asdict(block).items():
        if name != "cache_control":
            doc.json(block, name, value, TOOL_OUTPUT, outside=True)


def _tools(parsed: Parsed, doc: Document) -> None:
    for i, tool in enumerate(parsed.all_tools):
        if isinstance(tool, ClientTool):
            doc.text(tool, "description", tool.description)
            doc.json(tool, "input_schema", tool.input_schema)
            doc.json(tool, "input_examples", tool.input_examples, outside=True)
        else:
            # a server tool's definition (its configuration: domains, locations, servers)
            doc.json(parsed.all_tools, i, tool, outside=True)


def _settings(req: MessagesRequest | CountTokensRequest, doc: Document) -> None:
    if isinstance(req, MessagesRequest):
        _message_settings(req, doc)
    output = req.output_config
    if output is not UNSET and output.format not in (UNSET, None):
        doc.json(output.format, "schema", output.format.schema)
    context = req.context_management
    if context not in (UNSET, None) and isinstance(context.edits, list):
        for i, edit in enumerate(context.edits):
            doc.json(context.edits, i, edit, outside=True)
    for i, server in enumerate(req.mcp_servers or ()):
        doc.json(req.mcp_servers, i, server, outside=True)


def _message_settings(req: MessagesRequest, doc: Document) -> None:
    metadata = req.metadata
    if metadata is not UNSET:
        doc.text(metadata, "user_id", metadata.user_id, METADATA, outside=True)
    compaction = req.compaction
    if compaction is not UNSET and compaction is not None:
        doc.text(compaction, "instructions", compaction.instructions, PROMPT, outside=True)
    if req.container not in (UNSET, None) or req.thread not in (UNSET, None):
        doc.stateful = True     # a container, a thread: state kept at the upstream


def render(parsed: Parsed, doc: Document, decisions: Decisions) -> bytes:
    """The body for an upstream that serves the Messages API: the parse, as the stages left it."""
    req = parsed.request
    changes: dict[str, Any] = {}
    if req.tools is not UNSET:
        changes["tools"] = parsed.all_tools       # typed, and canonical where free-form
    if decisions.model is not None:
        changes["model"] = decisions.model
    if decisions.max_tokens is not None and isinstance(req, MessagesRequest):
        changes["max_tokens"] = decisions.max_tokens
    if decisions.tools_removed:
        changes["tools"] = UNSET
        changes["tool_choice"] = UNSET
    messages = req.messages
    if decisions.system_prompt is not None:
        changes["system"] = decisions.system_prompt
        messages = [m for m in messages if m.role != "system"]
    if doc.dropped:
        messages = [msgspec.structs.replace(m, content=doc.keep(m.content)) if isinstance(m.content, list) else m
                    for m in messages]
    if messages is not req.messages:
        changes["messages"] = messages
    return encode(msgspec.structs.replace(req, **changes))
