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

A stage that acts only on some routes names them in ``on_routes`` (route paths, matched
exactly against the request's path, as the edge matches routes, so it holds before the
edge too); the runner then skips it on every other path: no call, no timing (the dialect
stages on a chat request). ``None``, the default: every route.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, ClassVar, Protocol

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


class Stage(Protocol):
    name: ClassVar[str]
    holds: ClassVar[bool]
    on_routes: ClassVar[frozenset[str] | None]
    # the context slots (pipeline/context.py SLOTS) it cannot do its job without, and those it
    # writes: a gateway whose stages leave a need unwritten is refused at assembly
    needs: ClassVar[frozenset[str]]
    writes: ClassVar[frozenset[str]]

    async def admit(self, ctx: RequestContext) -> Refusal | Answer | None: ...

    async def on_abort(self, ctx: RequestContext, exit: Exit) -> None: ...

    async def on_complete(self, ctx: RequestContext, usage: Usage) -> None: ...


class BaseStage:
    """Defaults for stages that take nothing."""

    name: ClassVar[str] = "stage"
    holds: ClassVar[bool] = False
    on_routes: ClassVar[frozenset[str] | None] = None
    needs: ClassVar[frozenset[str]] = frozenset()
    writes: ClassVar[frozenset[str]] = frozenset()

    async def admit(self, ctx: RequestContext) -> Refusal | Answer | None:  # pragma: no cover - abstract
        raise NotImplementedError

    async def on_abort(self, ctx: RequestContext, exit: Exit) -> None:
        return None

    async def on_complete(self, ctx: RequestContext, usage: Usage) -> None:
        return None
