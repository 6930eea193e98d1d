"""A dialect request's parse, whichever the dialect: one entry each to parse a body, ask what
a chat backend cannot do, translate it to the chat request, and read or render its texts for
an upstream that serves the dialect itself. The stages call these and never pick a dialect's
module themselves."""

from __future__ import annotations

from typing import Any, Union

from . import messages_doc, messages_schema, messages_translate, responses_doc, responses_schema, responses_translate
from .common import Unsupported
from .document import Document
from .messages_doc import Decisions

Parsed = Union[responses_schema.Parsed, messages_schema.Parsed]


def parse(dialect: str, body: bytes, count_tokens: bool) -> tuple[Parsed, list[Unsupported]]:
    """The body under its dialect's strict schema (a ``Refusal`` raised when it does not fit),
    and what in it a translation to chat completions cannot do."""
    if dialect == "responses":
        responses = responses_schema.parse(body)
        return responses, responses_translate.unsupported(responses)
    messages = messages_schema.parse(body, count_tokens=count_tokens)
    return messages, messages_translate.unsupported(messages)


def chat_request(parsed: Parsed, native: bool, marks: dict[int, str] | None = None) -> dict[str, Any]:
    """The chat view of the parse (``parse`` asked ``unsupported`` already)."""
    if isinstance(parsed, responses_schema.Parsed):
        return responses_translate.chat_request(parsed, checked=True, native=native, marks=marks)
    return messages_translate.chat_request(parsed, checked=True, native=native, marks=marks)


def document(parsed: Parsed) -> Document:
    """The texts of a parse that goes to its upstream natively, where the stages edit them."""
    if isinstance(parsed, responses_schema.Parsed):
        return responses_doc.document(parsed)
    return messages_doc.document(parsed)


def render(parsed: Parsed, doc: Document, decisions: Decisions) -> bytes:
    """The dialect body for a native upstream, from the parse as the stages left it."""
    if isinstance(parsed, responses_schema.Parsed):
        return responses_doc.render(parsed, doc, decisions)
    return messages_doc.render(parsed, doc, decisions)
