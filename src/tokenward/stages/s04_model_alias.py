"""Model aliases: a request naming an alias of NAME (``models.NAME.aliases``) is NAME's.

Runs right after identity read the body and before anything reads its model (the dialect
stage, entitlement, the key's scope, operator pauses, validation, prices, the backend's
target): the body's ``model`` member is rewritten to NAME once, so every later stage
decides on NAME and metrics and the decision record label NAME, as for a request that
named it. The record notes which alias pattern matched (``notes.model_alias``: from the
config, a bounded set; the name asked for is the client's and is not recorded).

The answer carries the name the client asked for: a response transform, registered
before the dialect stage's (so applied after it, on what the client reads), puts it in
the answer's ``model`` wherever the API keeps it: the top level of a whole answer and of
every chat chunk, ``message`` in a Messages stream's ``message_start``, ``response`` in a
Responses stream's events. A request that names a model itself costs one set lookup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import msgspec

from ..config.aliases import ModelAliases
from ..config.schema import Config
from ..pipeline.stage import BaseStage
from ..wire.sse import SseEvent, SseSplitter
from ..wire.codec import json_encode as _encode, json_decode as _decode

if TYPE_CHECKING:
    from ..errors import Refusal
    from ..pipeline.context import RequestContext


# the routes whose body is not chat-shaped: their model is read from the top-level members
_DIALECT_PATHS = frozenset(("/v1/responses", "/v1/messages", "/v1/messages/count_tokens"))
# where a streamed event keeps the model: Messages' message_start, Responses' response.* events
_NESTED = ("message", "response")


class ModelAliasStage(BaseStage):
    name: ClassVar[str] = "model_alias"

    def __init__(self, aliases: ModelAliases) -> None:
        self.aliases = aliases

    def decide(self, ctx: RequestContext) -> Refusal | None:
        parsed = ctx.parsed
        if not parsed.raw:
            return None
        if ctx.path in _DIALECT_PATHS:
            asked = _member_model(parsed)
        else:
            peek = parsed.peek()
            asked = peek.model if peek is not None else None
        if asked.__class__ is not str or asked in self.aliases.names:
            return None   # not a string (validation says so), or a model's own name
        found = self.aliases.match(asked)
        if found is None:
            return None   # unknown_model, from validation
        name, pattern = found
        members = dict(parsed.members())
        members["model"] = msgspec.Raw(_encode(name))
        ctx.body = _encode(members)
        ctx.note("model_alias", pattern)
        ctx.add_transform(AskedModelName(asked))
        return None


def _member_model(parsed: Any) -> object:
    try:
        raw = parsed.members().get("model")
        return _decode(raw) if isinstance(raw, msgspec.Raw) else raw
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None   # not a JSON object: the dialect stage refuses it in its API's terms


class AskedModelName:
    """A response transform: the answer's ``model`` is the name the client asked for."""

    __slots__ = ("asked",)

    def __init__(self, asked: str) -> None:
        self.asked = asked

    def whole(self, body: bytes) -> bytes:
        if b'"model"' not in body:
            return body   # an error envelope, or an answer without one
        return self._renamed(body) or body

    def events(self, events: list[SseEvent]) -> list[SseEvent]:
        out = events
        for i, event in enumerate(events):
            renamed = self._event(event) if b'"model"' in event.raw else None
            if renamed is not None:
                if out is events:
                    out = list(events)
                out[i] = renamed
        return out

    def finish(self) -> list[SseEvent]:
        return []

    def close(self, tail: bytes) -> bytes:
        """The stream's last bytes (a usage chunk the gateway wrote, say) name it too."""
        if b'"model"' not in tail:
            return tail
        splitter = SseSplitter()
        parts = splitter.feed(tail)
        return b"".join((self._event(part) or part).raw for part in parts) + splitter.finish()

    def _event(self, event: SseEvent) -> SseEvent | None:
        data = event.data
        if data is not None:
            renamed = self._renamed(data)
            return None if renamed is None else SseEvent(_with_data(event.raw, data, renamed))
        # several events written as one (a dialect's translation of a chat chunk): each
        splitter = SseSplitter()
        parts = splitter.feed(event.raw)
        fixed = [self._event(part) if part.data is not None else None for part in parts]
        if not any(fixed):
            return None
        raw = b"".join((new or old).raw for old, new in zip(parts, fixed)) + splitter.finish()
        return SseEvent(raw)

    def _renamed(self, data: bytes) -> bytes | None:
        """``data`` with its model set to the asked name, or None when it has none to set."""
        try:
            tree = _decode(data)
        except msgspec.DecodeError:
            return None
        if not isinstance(tree, dict):
            return None
        holder = tree if "model" in tree else next(
            (tree[k] for k in _NESTED if isinstance(tree.get(k), dict) and "model" in tree[k]), None)
        if holder is None or holder["model"] == self.asked:
            return None
        holder["model"] = self.asked
        return _encode(tree)


def _with_data(raw: bytes, old: bytes, new: bytes) -> bytes:
    """The event's bytes with its data replaced (its ``event:`` and ``id:`` lines kept)."""
    if old in raw:
        return raw.replace(old, new, 1)
    kept = [line for line in raw.splitlines() if line and not line.startswith(b"data:")]
    return b"\n".join([*kept, b"data: " + new]) + b"\n\n"


def build(config: Config) -> ModelAliasStage | None:
    aliases = ModelAliases(config)
    if not aliases:
        return None    # no model has aliases: the stage is left out
    return ModelAliasStage(aliases)
