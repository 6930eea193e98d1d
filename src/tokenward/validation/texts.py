"""The texts a model reads, where each sits in the request, and how to change it there.

Screening reads every caller-controlled string of a request that reaches the model (or
the backend), and masking writes the new value back in place. Both work on
``TextUnit``s, each made of one or more ``Piece``s:

- a **piece** is one string of the typed request: its holder (a msgspec Struct, a list or
  a dict), the key (attribute name or index) and the text. ``write`` puts a new text in
  place; ``form`` says how: ``PLAIN`` a string, ``JSON_RAW`` free-form JSON kept as
  ``msgspec.Raw`` (a tool's schema: screened as its canonical JSON text, parsed back
  when replaced), ``FILE`` a chat file part whose extracted text replaces the whole part;
- a **unit** is what the model reads as one text: the plain concatenation of its pieces.
  A message's text parts are one unit (no separator added, as a chat template joins
  them), so an instruction or a value split across parts is seen whole; a finding is
  mapped back to the parts it covers (pii/placeholders.py ``Masker.mask_unit``).

JSON held in a string or in ``Raw`` (tool-call arguments, schemas) is screened as its
canonical text when it contains an escape: ``"carol\\u0040corp.example"`` is the same
characters as ``"carol@corp.example"``, and a detector must see the latter. Masking
writes the canonical text back, so the backend receives what was screened.

``kind`` tells screeners where a text came from: ``PROMPT`` (what the caller wrote or
the assistant said), ``TOOL_OUTPUT`` (tool results and text extracted from files:
indirect injection arrives there), ``METADATA`` (labels and values the backend receives
but the model may not read).

``chat_units`` walks a validated chat, completions or embeddings request
(``NormalizedRequest``); a dialect parsed for native forwarding gives its own units
(dialects/*_doc.py).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec
from msgspec import UNSET

from .result import NormalizedRequest
from .schemas import (
    AssistantMessage,
    ChatCompletionRequest,
    CompletionRequest,
    JsonSchemaFormat,
    RefusalPart,
    TextPart,
    ToolMessage,
)
from ..wire.codec import json_decode as _decode, json_encode as _encode

PLAIN = 0
JSON_RAW = 1
FILE = 2

PROMPT = "prompt"
TOOL_OUTPUT = "tool_output"
METADATA = "metadata"


def canonical_json(text: str) -> str:
    """``text``'s JSON in canonical form (escapes written as the characters they stand for),
    or ``text`` itself when it has no escape or is not JSON."""
    if "\\" not in text:
        return text
    try:
        return _encode(_decode(text)).decode()
    except (msgspec.DecodeError, RecursionError, ValueError):
        return text


class Span(NamedTuple):
    """A finding in the texts screened: which unit, where in its text, what it is (an
    entity type such as EMAIL, or a signal name such as override)."""

    text: int          # index into the units (their texts) screened
    start: int
    end: int
    label: str


class Piece:
    """One string of the request, and how to replace it (module docstring)."""

    __slots__ = ("holder", "key", "text", "form")

    def __init__(self, holder: Any, key: Any, text: str, form: int = PLAIN) -> None:
        self.holder = holder
        self.key = key
        self.text = text
        self.form = form

    def write(self, text: str) -> None:
        form = self.form
        value: Any = text
        if form == JSON_RAW:
            value = msgspec.Raw(text.encode())
        elif form == FILE:
            value = TextPart(text=text)
        key = self.key
        if type(key) is str and not isinstance(self.holder, dict):
            setattr(self.holder, key, value)
        else:
            self.holder[key] = value
        self.text = text


class TextUnit:
    """What the model reads as one text: its pieces joined (module docstring)."""

    __slots__ = ("pieces", "kind", "text")

    def __init__(self, pieces: list[Piece], kind: str = PROMPT) -> None:
        self.pieces = pieces
        self.kind = kind
        self.text = pieces[0].text if len(pieces) == 1 else "".join([p.text for p in pieces])

    @classmethod
    def one(cls, holder: Any, key: Any, text: str, kind: str = PROMPT, form: int = PLAIN) -> TextUnit:
        return cls([Piece(holder, key, text, form)], kind)

    @classmethod
    def json_raw(cls, holder: Any, key: Any, raw: msgspec.Raw, kind: str = PROMPT) -> TextUnit:
        """Free-form JSON kept as ``Raw``: screened, and written back, as canonical text."""
        text = bytes(raw).decode("utf-8", "replace")
        canonical = canonical_json(text)
        piece = Piece(holder, key, canonical, JSON_RAW)
        if canonical is not text:
            # the typed request holds the form that was screened: a body rendered from it
            # (a native dialect body, a masked chat body) carries no escape the screen missed
            piece.write(canonical)
        return cls([piece], kind)


def _parts(parts: list[Any], kind: str, found: list[TextUnit]) -> None:
    """A message's text parts as one unit; its refusal parts each as one."""
    pieces = []
    for j, part in enumerate(parts):
        part_type = type(part)
        if part_type is TextPart:
            pieces.append(Piece(part, "text", part.text))
        elif part_type is RefusalPart:
            found.append(TextUnit.one(part, "refusal", part.refusal, kind))
    if pieces:
        found.append(TextUnit(pieces, kind))


def _content(holder: Any, kind: str, found: list[TextUnit]) -> None:
    content = holder.content
    if type(content) is str:
        found.append(TextUnit.one(holder, "content", content, kind))
    elif content:
        _parts(content, kind, found)


def _assistant(message: AssistantMessage, found: list[TextUnit]) -> None:
    if isinstance(message.refusal, str):
        found.append(TextUnit.one(message, "refusal", message.refusal))
    for call in message.tool_calls or ():
        fn = call.function
        found.append(TextUnit.one(fn, "arguments", canonical_json(fn.arguments)))
    if message.function_call:
        fn = message.function_call
        found.append(TextUnit.one(fn, "arguments", canonical_json(fn.arguments)))


def _chat(body: Any, found: list[TextUnit]) -> None:
    for message in body.messages:
        message_type = type(message)
        _content(message, TOOL_OUTPUT if message_type is ToolMessage else PROMPT, found)
        if message_type is not ToolMessage and message.name is not UNSET:
            found.append(TextUnit.one(message, "name", message.name))
        if message_type is AssistantMessage:
            _assistant(message, found)
    for tool in body.tools or ():
        fn = tool.function
        if fn.description is not UNSET:
            found.append(TextUnit.one(fn, "description", fn.description))
        if fn.parameters is not UNSET:
            found.append(TextUnit.json_raw(fn, "parameters", fn.parameters))
    fmt = body.response_format
    if isinstance(fmt, JsonSchemaFormat):
        spec = fmt.json_schema
        if spec.description is not UNSET:
            found.append(TextUnit.one(spec, "description", spec.description))
        if spec.schema is not UNSET:
            found.append(TextUnit.json_raw(spec, "schema", spec.schema))
    metadata = body.metadata
    if isinstance(metadata, dict):
        found.extend(TextUnit.one(metadata, key, value, METADATA) for key, value in metadata.items())


def _label(body: Any, name: str, value: object, found: list[TextUnit]) -> None:
    """A caller label the backend receives (``user``, ...): screened as metadata."""
    if type(value) is str:
        found.append(TextUnit.one(body, name, value, METADATA))


def _items(body: Any, field: str, value: object, found: list[TextUnit]) -> None:
    if type(value) is str:
        found.append(TextUnit.one(body, field, value))
    elif isinstance(value, list) and value and type(value[0]) is str:
        found.extend(TextUnit.one(value, i, item) for i, item in enumerate(value))


def chat_units(request: NormalizedRequest) -> list[TextUnit]:
    """The units of a validated request, in document order: every text the model reads,
    attachments' extracted text included (a file part's text replaces the part when masked)."""
    body = request.body
    found: list[TextUnit] = []
    if isinstance(body, ChatCompletionRequest):
        _chat(body, found)
        _label(body, "user", body.user, found)
        _label(body, "safety_identifier", body.safety_identifier, found)
    elif isinstance(body, CompletionRequest):
        _items(body, "prompt", body.prompt, found)
        if isinstance(body.suffix, str):
            found.append(TextUnit.one(body, "suffix", body.suffix))
        _label(body, "user", body.user, found)
    else:
        _items(body, "input", body.input, found)
        _label(body, "user", body.user, found)
    for attachment in request.attachments:
        text = attachment.text
        if text:
            path = attachment.path
            if path is None:
                # text with no place in the body (never the case for chat file parts)
                found.append(TextUnit([Piece(None, None, text, FILE)], TOOL_OUTPUT))
            else:
                _, i, _, j = path
                found.append(TextUnit.one(body.messages[i].content, j, text, TOOL_OUTPUT, FILE))
    return found


def texts_of(units: list[TextUnit]) -> list[str]:
    return [unit.text for unit in units]


__all__ = ["FILE", "JSON_RAW", "METADATA", "PLAIN", "PROMPT", "TOOL_OUTPUT", "Piece", "Span", "TextUnit",
           "canonical_json", "chat_units", "texts_of"]
