"""The one extension point: a pipeline stage.

A stage decides from the request context: ``admit`` returns ``None`` to let the request
go on (having stored its frozen result on the context), a ``Refusal`` to end it, or an
``Answer`` (below) to answer it itself. A stage that needs to see the
answer on its way out (to restore what it masked) registers a response transform with
``ctx.add_transform`` while admitting. A stage that takes something (a reservation, a
slot) sets ``holds = True``: the runner then calls exactly one of its two release hooks,
exactly once, however the request ends:

- ``on_abort(ctx, exit)`` when the request ended before the backend confirmed the end of
  the work (a later stage refused, an error, a cancellation, a disconnect, a backend that
  failed); ``exit`` says why and carries whatever usage is known;
- ``on_complete(ctx, usage)`` when the backend finished the work and usage is settled.

A stage whose decision needs no waiting (most of them, most of the time) implements
``decide`` instead of ``admit``: a plain call that returns the decision, or, when it must
wait after all (a key store read, a body still arriving, a remote store), the coroutine
that finishes it, which the runner awaits. A coroutine created and awaited costs ~700
instructions more than a call that returns at once, per stage of every request. The
runner calls ``decide``; ``admit`` (the same decision, awaited) is for every other caller,
and ``BaseStage`` makes each of the two from the other. Releases likewise: ``complete`` and
``abort`` give back at once (None) or return the coroutine that finishes the release;
``on_complete`` and ``on_abort`` are the same, awaited.

A stage that acts only on some routes names them in ``on_routes`` (route paths, matched
exactly against the request's path, as the edge matches routes, so it holds before the
edge too); the runner then skips it on every other path: no call, no timing (the dialect
stages on a chat request). ``None``, the default: every route.
"""

from __future__ import annotations

import enum
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, Union

from ..errors import Refusal
from ..reconcile.usage import Usage

if TYPE_CHECKING:
    from .context import RequestContext
    from .outbound import Outbound


class ExitKind(enum.Enum):
    REJECTED = "rejected"          # a later stage refused the request
    ERROR = "error"                # an exception inside the gateway
    CANCELLED = "cancelled"        # client disconnect or task cancellation
    UPSTREAM_FAILED = "upstream_failed"  # backend unreachable, timed out, died mid-stream
    STREAM_TIMEOUT = "stream_timeout"    # idle timeout or max duration ended the stream
    ANSWERED = "answered"          # a later stage answered the request itself (no backend work)
    COMPLETED = "completed"


class Exit:
    __slots__ = ("kind", "reason", "usage")

    def __init__(self, kind: ExitKind, reason: str | None = None, usage: Usage | None = None) -> None:
        self.kind = kind
        self.reason = reason
        self.usage = usage

    def __repr__(self) -> str:
        return f"Exit({self.kind.value}, {self.reason!r})"


class Answer(Protocol):
    """What a stage returns to answer the request itself (a cache hit). The runner unwinds
    what the stages before it took, as for a refusal, then calls ``deliver``."""

    async def deliver(self, ctx: RequestContext, out: Outbound) -> Exit:
        ...


# What a stage decides: go on (None), a refusal, or an answer of its own
Decided = Union[Refusal, Answer, None]
# ``decide``'s result: the decision, or the coroutine that finishes it when it must wait
Deciding = Union[Refusal, Answer, None, Coroutine[Any, Any, Decided]]


# ``complete``'s and ``abort``'s result: None (released), or the coroutine that finishes it
Releasing = Union[Coroutine[Any, Any, None], None]


class Stage(Protocol):
    name: ClassVar[str]
    holds: ClassVar[bool]
    on_routes: ClassVar[frozenset[str] | None]
    # the context slots (pipeline/context.py SLOTS) it cannot do its job without, and those it
    # writes: a gateway whose stages leave a need unwritten is refused at assembly
    needs: ClassVar[frozenset[str]]
    writes: ClassVar[frozenset[str]]

    async def admit(self, ctx: RequestContext) -> Refusal | Answer | None: ...

    def decide(self, ctx: RequestContext) -> Deciding: ...

    async def on_abort(self, ctx: RequestContext, exit: Exit) -> None: ...

    async def on_complete(self, ctx: RequestContext, usage: Usage) -> None: ...

    def abort(self, ctx: RequestContext, exit: Exit) -> Releasing: ...

    def complete(self, ctx: RequestContext, usage: Usage) -> Releasing: ...


class BaseStage:
    """Defaults for stages that take nothing."""

    name: ClassVar[str] = "stage"
    holds: ClassVar[bool] = False
    on_routes: ClassVar[frozenset[str] | None] = None
    needs: ClassVar[frozenset[str]] = frozenset()
    writes: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # each of admit and decide is made from the other: a stage must define one of them
        if cls.admit is BaseStage.admit and cls.decide is BaseStage.decide:
            raise TypeError(f"stage {cls.__name__} defines neither admit nor decide")

    async def admit(self, ctx: RequestContext) -> Refusal | Answer | None:
        """The decision, awaited: ``decide``'s, for a stage that defines ``decide``."""
        decided = self.decide(ctx)
        if isinstance(decided, Coroutine):
            return await decided
        return decided

    def decide(self, ctx: RequestContext) -> Deciding:
        """``admit``'s coroutine, for a stage that defines ``admit`` (the runner awaits it)."""
        return self.admit(ctx)

    async def on_abort(self, ctx: RequestContext, exit: Exit) -> None:
        """``abort``, awaited; nothing for a stage that defines neither."""
        if type(self).abort is not BaseStage.abort:
            releasing = self.abort(ctx, exit)
            if releasing is not None:
                await releasing

    async def on_complete(self, ctx: RequestContext, usage: Usage) -> None:
        """``complete``, awaited; nothing for a stage that defines neither."""
        if type(self).complete is not BaseStage.complete:
            releasing = self.complete(ctx, usage)
            if releasing is not None:
                await releasing

    def abort(self, ctx: RequestContext, exit: Exit) -> Releasing:
        """``on_abort``'s coroutine, for a stage that defines ``on_abort`` (the runner awaits it)."""
        return self.on_abort(ctx, exit)

    def complete(self, ctx: RequestContext, usage: Usage) -> Releasing:
        """``on_complete``'s coroutine, for a stage that defines ``on_complete``."""
        return self.on_complete(ctx, usage)
