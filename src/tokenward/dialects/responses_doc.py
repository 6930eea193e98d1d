"""A Responses request forwarded natively: every text it carries, and its body rendered from the parse.

As messages_doc.py does for Messages: ``document(parsed)`` lists every text the backend
will receive (instructions, each message's text parts joined, tool-call arguments and
outputs, custom tool inputs, reasoning summaries and content, annotations, tool
definitions, server-side items and tools as JSON text, metadata, a stored prompt's
variables) and what is stateful; ``render`` encodes the parse again with what the stages
decided.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET

from .common import encode
from ..validation.texts import Piece
from .document import METADATA, PROMPT, TOOL_OUTPUT, Document, ReplacingPiece
from .messages_doc import Decisions
from .responses_items import (
    ContainerFileCitation,
    FileCitation,
    UrlCitation,
    CompactionItem,
    CustomToolCallItem,
    CustomToolCallOutputItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    InputFile,
    InputText,
    ItemReference,
    MessageItem,
    OutputText,
    ReasoningItem,
    RefusalContent,
)
from .responses_schema import (
    AdditionalToolsItem,
    AllowedToolsChoice,
    CustomGrammarFormat,
    CustomTool,
    NamespaceTool,
    FunctionTool,
    Parsed,
    TextFormatJsonSchema,
)

__all__ = ["Decisions", "document", "render"]


def document(parsed: Parsed) -> Document:
    doc = Document()
    req = parsed.request
    doc.text(req, "instructions", req.instructions)
    if isinstance(req.input, str):
        doc.text(req, "input", req.input)
    for i, item in enumerate(parsed.all_items):
        _item(parsed.all_items, i, item, doc)
    _tools(parsed.all_tools, doc)
    _settings(parsed, doc)
    return doc


def _tools(tools: list[Any], doc: Document) -> None:
    for i, tool in enumerate(tools):
        if isinstance(tool, FunctionTool):
            doc.text(tool, "description", tool.description)
            doc.json(tool, "parameters", tool.parameters)
            doc.json(tool, "output_schema", tool.output_schema, outside=True)
        elif isinstance(tool, CustomTool):
            doc.text(tool, "description", tool.description)
            if isinstance(tool.format, CustomGrammarFormat):
                doc.text(tool.format, "definition", tool.format.definition, outside=True)
        elif isinstance(tool, NamespaceTool):
            doc.text(tool, "description", tool.description, outside=True)
            _tools(tool.tools, doc)
        else:
            doc.json(tools, i, tool, outside=True)   # a built-in tool's configuration


def _item(items: list[Any], i: int, item: Any, doc: Document) -> None:
    kind = type(item)
    if kind is MessageItem:
        _message(item, doc)
    elif kind is FunctionCallItem:
        doc.json_text(item, "arguments", item.arguments)
    elif kind is FunctionCallOutputItem or kind is CustomToolCallOutputItem:
        _output(item, doc)
    elif kind is CustomToolCallItem:
        doc.text(item, "input", item.input)
    elif kind is ReasoningItem:
        for part in item.summary:
            doc.text(part, "text", part.text, outside=True)
        for part in item.content or ():
            doc.text(part, "text", part.text, outside=True)
        doc.opaque(item.encrypted_content)
    elif kind is CompactionItem:
        doc.opaque(item.encrypted_content)
        doc.stateful = True     # the upstream decrypts earlier context the gateway cannot read
    elif kind is ItemReference:
        doc.stateful = True
    elif kind is AdditionalToolsItem:
        _tools(item.tools, doc)
    else:
        doc.json(items, i, item, TOOL_OUTPUT, outside=True)    # a server-side item


def _message(item: MessageItem, doc: Document) -> None:
    content = item.content
    if isinstance(content, str):
        doc.text(item, "content", content)
        return
    pieces = [Piece(part, "text", part.text) for part in content
              if isinstance(part, (InputText, OutputText)) and part.text]
    doc.joined(pieces)
    for part in content:
        if isinstance(part, RefusalContent):
            doc.text(part, "refusal", part.refusal)
        elif isinstance(part, OutputText):
            for annotation in part.annotations or ():
                if isinstance(annotation, UrlCitation):
                    doc.text(annotation, "title", annotation.title, TOOL_OUTPUT, outside=True)
                    doc.text(annotation, "url", annotation.url, TOOL_OUTPUT, outside=True)
                elif isinstance(annotation, (FileCitation, ContainerFileCitation)):
                    doc.text(annotation, "filename", annotation.filename, TOOL_OUTPUT, outside=True)
        elif isinstance(part, InputFile):
            doc.text(part, "filename", part.filename, METADATA, outside=True)
            if isinstance(part.file_data, str):
                _attachment(content, part, doc)


def _attachment(content: list[Any], part: InputFile, doc: Document) -> None:
    """A file's text is extracted from the chat view by validation: screened and, when
    masked, sent as an ``input_text`` part in place of the file."""
    def piece(text: str) -> ReplacingPiece:
        at = next(k for k, other in enumerate(content) if other is part)
        return ReplacingPiece(content, at, text, lambda masked: InputText(text=masked))
    doc.attachments.append(piece)


def _output(item: Any, doc: Document) -> None:
    output = item.output
    if isinstance(output, str):
        doc.text(item, "output", output, TOOL_OUTPUT)
        return
    doc.joined([Piece(part, "text", part.text) for part in output if isinstance(part, InputText) and part.text],
               TOOL_OUTPUT)
    for part in output:
        if isinstance(part, InputFile):
            doc.text(part, "filename", part.filename, METADATA, outside=True)


def _settings(parsed: Parsed, doc: Document) -> None:
    req = parsed.request
    if req.metadata or req.client_metadata:     # (UNSET and None are false too)
        for values in (req.metadata, req.client_metadata):
            if isinstance(values, dict):
                for key, value in values.items():
                    doc.text(values, key, value, METADATA, outside=True)
    if req.user or req.safety_identifier or req.prompt_cache_key:     # most requests carry none of them
        for name, identifier in (("user", req.user), ("safety_identifier", req.safety_identifier),
                                 ("prompt_cache_key", req.prompt_cache_key)):
            doc.text(req, name, identifier, METADATA, outside=True)
    text = req.text
    if text not in (UNSET, None) and isinstance(text.format, TextFormatJsonSchema):
        doc.json(text.format, "schema", text.format.schema)
        doc.text(text.format, "description", text.format.description)
    choice = parsed.tool_choice
    if isinstance(choice, AllowedToolsChoice):
        for i, ref in enumerate(choice.tools):
            doc.json(choice.tools, i, ref, METADATA, outside=True)
    elif parsed.server_choice:
        doc.json(req, "tool_choice", req.tool_choice, METADATA, outside=True)
    prompt = req.prompt
    if prompt not in (UNSET, None):
        doc.stateful = True     # a prompt template kept at the upstream
        for name, variable in (prompt.variables or {}).items():
            doc.json(prompt.variables, name, variable, outside=True)
    if isinstance(req.previous_response_id, str) or req.conversation not in (UNSET, None):
        doc.stateful = True
    if req.background is True or req.store is True:
        doc.stateful = True     # the upstream keeps the response; a later request reads it


def render(parsed: Parsed, doc: Document, decisions: Decisions) -> bytes:
    """The body for an upstream that serves the Responses API: the parse, as the stages left it."""
    req = parsed.request
    changes: dict[str, Any] = {}
    items = parsed.all_items
    if decisions.system_prompt is not None:
        changes["instructions"] = decisions.system_prompt
        items = [item for item in items if not (isinstance(item, MessageItem) and item.role in ("system", "developer"))]
    if isinstance(req.input, list):
        changes["input"] = items            # typed, and canonical where free-form
    if req.tools not in (UNSET, None):
        changes["tools"] = parsed.all_tools
    if isinstance(parsed.tool_choice, (str, msgspec.Struct)):
        changes["tool_choice"] = parsed.tool_choice
    if decisions.model is not None:
        changes["model"] = decisions.model
    if decisions.max_tokens is not None:
        changes["max_output_tokens"] = decisions.max_tokens
    if decisions.tools_removed:
        changes.update(tools=UNSET, tool_choice=UNSET, parallel_tool_calls=UNSET)
    return encode(msgspec.structs.replace(req, **changes))
