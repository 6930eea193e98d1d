"""A dialect request as the backend will read it: its texts, what it holds beyond the chat view,
and the pieces of it that masking may rewrite.

A request whose model's upstream serves its dialect natively is forwarded as the dialect,
rendered from its parse (``messages_doc``, ``responses_doc``), never copied from the
client's bytes. The stages check, count and reserve the chat view; a ``Document`` says what
the rendered body carries beyond it, so nothing reaches the backend unread:

- ``units``: every text the rendered body carries (validation/texts.py ``TextUnit``), in
  document order: what screening reads and masking rewrites in place;
- ``outside``: the texts of those that the chat view leaves out (thinking, reasoning
  summaries, citations, metadata, server-side results, ...): the work stage counts them
  with the model's tokenizer on top of the chat view's prompt;
- ``opaque_bytes``: opaque state (signatures, encrypted content), counted as one token a byte;
- ``stateful``: the backend reads context the request does not carry (a stored response,
  a conversation, a container): the work stage reserves the whole context for the prompt;
- ``attachments``: the pieces standing for files whose text validation extracts from the
  chat view (a PDF), in the chat view's order, so that text is screened and masked too.
"""

from __future__ import annotations

from typing import Any

from msgspec import UNSET, Raw

from ..validation.texts import JSON_RAW, METADATA, PROMPT, TOOL_OUTPUT, Piece, TextUnit, canonical_json

__all__ = ["Document", "JSON_RAW", "METADATA", "PROMPT", "TOOL_OUTPUT", "SignedPiece", "ReplacingPiece"]


class SignedPiece(Piece):
    """The text of a signed block (a thinking block and its signature): changing it would
    break the signature, so a block whose text masking changes is left out of the render."""

    __slots__ = ("dropped",)

    def __init__(self, holder: Any, key: str, text: str, dropped: set[int]) -> None:
        super().__init__(holder, key, text)
        self.dropped = dropped

    def write(self, text: str) -> None:
        self.dropped.add(id(self.holder))
        self.text = text


class ReplacingPiece(Piece):
    """A file's extracted text: masking replaces the file by a text built by ``make``."""

    __slots__ = ("make",)

    def __init__(self, holder: Any, key: Any, text: str, make: Any) -> None:
        super().__init__(holder, key, text)
        self.make = make

    def write(self, text: str) -> None:
        value = self.make(text)
        if isinstance(self.key, str):
            setattr(self.holder, self.key, value)
        else:
            self.holder[self.key] = value
        self.text = text


class Document:
    """What a natively forwarded dialect request carries (module docstring).

    A plain string is noted as (holder, key, text, kind) and made a ``TextUnit`` only when
    ``units`` is first read (screening, or normalizing a text that is not ASCII): most
    requests go with no stage reading them one by one, and a unit and its piece per text
    were most of what the walk cost. The walk is done before ``units`` is read."""

    __slots__ = ("found", "outside", "opaque_bytes", "stateful", "dropped", "attachments", "_units")

    def __init__(self) -> None:
        self.found: list[TextUnit | tuple[Any, Any, str, str]] = []   # in document order
        self.outside: list[str] = []
        self.opaque_bytes = 0
        self.stateful = False
        self.dropped: set[int] = set()     # ids of signed blocks left out of the render
        self.attachments: list[Any] = []   # factories of the pieces for extracted file texts
        self._units: list[TextUnit] | None = None

    @property
    def units(self) -> list[TextUnit]:
        """Every text the rendered body carries, in document order (made once)."""
        units = self._units
        if units is None:
            units = self._units = [TextUnit([Piece(*found[:3])], found[3]) if isinstance(found, tuple) else found
                                   for found in self.found]
        return units

    # -- adding what a walk finds ---------------------------------------------------------
    def text(self, holder: Any, key: Any, text: Any, kind: str = PROMPT, outside: bool = False) -> None:
        if type(text) is not str or not text:
            return
        self.found.append((holder, key, text, kind))
        if outside:
            self.outside.append(text)

    def joined(self, pieces: list[Piece], kind: str = PROMPT, outside: bool = False) -> None:
        if not pieces:
            return
        unit = TextUnit(pieces, kind)
        self.found.append(unit)
        if outside:
            self.outside.append(unit.text)

    def json(self, holder: Any, key: Any, raw: Any, kind: str = PROMPT, outside: bool = False) -> None:
        """Free-form JSON (``Raw``): screened and forwarded as its canonical text."""
        if not isinstance(raw, Raw):
            return
        unit = TextUnit.json_raw(holder, key, raw, kind)
        self.found.append(unit)
        if outside:
            self.outside.append(unit.text)

    def json_text(self, holder: Any, key: str, text: str, kind: str = PROMPT) -> None:
        """JSON held in a string (tool-call arguments): screened and forwarded canonical."""
        canonical = canonical_json(text)
        if canonical is not text:
            setattr(holder, key, canonical)
        self.text(holder, key, canonical, kind)

    def signed(self, holder: Any, key: str, text: str) -> None:
        if text:
            self.found.append(TextUnit([SignedPiece(holder, key, text, self.dropped)]))
            self.outside.append(text)

    def opaque(self, value: Any) -> None:
        if type(value) is str:
            self.opaque_bytes += len(value)

    def keep(self, blocks: list[Any]) -> list[Any]:
        """``blocks`` without the signed ones masking changed."""
        if not self.dropped:
            return blocks
        return [block for block in blocks if id(block) not in self.dropped]


def unset_or_none(value: Any) -> bool:
    return value is UNSET or value is None
