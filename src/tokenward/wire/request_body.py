"""The request body: its bytes, a version every rewrite bumps, and the views decoded from them.

Every part of the gateway that reads the client's JSON reads it here, and each view is
decoded at most once per version of the body:

- ``peek()``: the lenient look the stages before validation share (identity's ``user``,
  entitlement's model, tools and features, the control stage's model and ``stream``,
  admission's output bound when no validation ran). Fields are typed ``object`` where a
  stage only tells "present and of the right type", so a body that validation will refuse
  precisely still peeks; a body that does not fit even this reads as None.
- ``typed(decoder)``: the route's strict schema (validation/request.py hands in its decoder),
  raising msgspec's error for validation to turn into a precise refusal.
- ``tree()`` and ``edit()``: the whole body as Python values, for a stage that rewrites it
  (a system prompt replaced, personal data masked). ``edit()`` hands the caller a tree it
  owns; ``rewrite(tree)`` encodes it as the next version and keeps it as that version's tree.
- ``members()``: the top-level members as raw bytes, for the forward step's one-member edits
  (a model rename, the usage option), so the messages are copied, not decoded and encoded.

Assigning new bytes (``replace``) bumps the version and drops every view, so no stage can
read a view of bytes that are no longer the body (before, each stage kept its own cache and
had to remember to clear the others'). Sans-IO: bytes in, values out.
"""

from __future__ import annotations

from typing import Any, Callable, Final, NamedTuple

import msgspec

from .codec import json_encode as _encode
# re-exported: the stages import the peek's shapes from here
from .peek_fields import FIRST_VLLM_FIELD, VLLM_FIELDS, BodyPeek, PeekFields, PeekMessage, Unfit

__all__ = ["FIRST_VLLM_FIELD", "VLLM_FIELDS", "BodyPeek", "PeekFields", "PeekMessage", "RequestBody", "StrictPeek"]


class StrictPeek(NamedTuple):
    """A route's strict decoder and how to read the peek off its result (None: it cannot
    say exactly, peek leniently): validation/peek.py's ``STRICT_CHAT``, set on the body by
    the edge where validation will decode it strictly anyway."""

    decoder: msgspec.json.Decoder[Any]
    peek: Callable[[Any], PeekFields | None]


# not Final: tests/pipeline/test_body_peek.py counts the decodes by replacing it
_decode_peek = msgspec.json.Decoder(BodyPeek).decode
_decode_tree: Final = msgspec.json.Decoder(dict[str, Any]).decode
_decode_members: Final = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode

_UNFIT: Final = Unfit.UNFIT
_ERRORS: Final = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)


class RequestBody:
    __slots__ = ("raw", "version", "strict", "_peek", "_tree", "_members", "_typed", "_typed_by")

    def __init__(self, raw: bytes = b"") -> None:
        self.raw = raw
        self.version = 0
        # the route's strict decode, to peek through (StrictPeek); kept across versions
        self.strict: StrictPeek | None = None
        self._peek: PeekFields | Unfit | None = None
        self._tree: dict[str, Any] | None = None
        self._members: dict[str, Any] | None = None
        self._typed: Any = None
        self._typed_by: Any = None

    def replace(self, raw: bytes) -> None:
        """New bytes for the body: the next version, with no view decoded yet."""
        # the views cleared here, not in a helper: once per request at least (the edge)
        self.raw = raw
        self.version += 1
        self._peek = self._tree = self._members = self._typed = self._typed_by = None

    def rewrite(self, tree: dict[str, Any]) -> None:
        """The body becomes ``tree`` encoded; the tree stays as that version's ``tree()``."""
        self.replace(_encode(tree))
        self._tree = tree

    def peek(self) -> PeekFields | None:
        """The lenient ``BodyPeek`` of this version, or None when there is no body or it
        does not fit (validation then refuses it with the precise error)."""
        peek = self._peek
        if peek is None:
            if not self.raw:
                return None
            strict = self.strict
            if strict is not None:
                peek = self._strict_peek(strict)
            if peek is None:
                try:
                    peek = _decode_peek(self.raw)
                except _ERRORS:
                    peek = _UNFIT
            self._peek = peek
        return peek if peek is not _UNFIT else None

    def _strict_peek(self, strict: StrictPeek) -> PeekFields | None:
        """The peek read off the strict decode (kept as the typed view), or None: the body
        does not fit the strict schema (validation names why), or the peek cannot be read
        off it exactly."""
        try:
            typed = self.typed(strict.decoder)
        except _ERRORS:
            return None
        return strict.peek(typed)

    def typed(self, decoder: msgspec.json.Decoder[Any]) -> Any:
        """This version decoded by ``decoder`` (a route's strict schema); msgspec's error
        propagates for the caller to name."""
        if self._typed_by is not decoder:
            self._typed = decoder.decode(self.raw)
            self._typed_by = decoder
        return self._typed

    def tree(self) -> dict[str, Any]:
        """The body as Python values, to read (edit() for a tree to change)."""
        tree = self._tree
        if tree is None:
            tree = self._tree = _decode_tree(self.raw)
        return tree

    def edit(self) -> dict[str, Any]:
        """A tree of this version the caller owns: change it, then ``rewrite`` it."""
        tree = self._tree
        if tree is None:
            return _decode_tree(self.raw)
        self._tree = None
        return tree

    def members(self) -> dict[str, Any]:
        """The top-level members, each a ``msgspec.Raw`` unless the tree is already decoded."""
        if self._tree is not None:
            return self._tree
        members = self._members
        if members is None:
            members = self._members = _decode_members(self.raw)
        return members
