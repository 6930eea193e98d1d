"""Dialect exit: first of all, before the edge, on the dialects' paths.

Wraps the request's ``send`` (dialects/exit.py ``DialectSend``), so every response from
here on, the edge's and identity's refusals included, carries the API's rate-limit headers
and every refusal the API's own error envelope (OpenAI's for Responses, Anthropic's for
Messages).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, ClassVar

from ..dialects.exit import DialectSend
from ..pipeline.stage import BaseStage
from .s05_dialect import DIALECTS

if TYPE_CHECKING:
    from ..pipeline.context import RequestContext


class DialectExitStage(BaseStage):
    """First, before the edge: the dialect's envelope and headers from here on, so a refusal
    by the edge (method, media type, the body's size) or identity (credentials) on a
    dialect's path is in the API's own terms too."""
    on_routes: ClassVar[frozenset[str] | None] = frozenset(DIALECTS)   # the runner calls it on these only

    name = "dialect_exit"

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock

    def decide(self, ctx: RequestContext) -> None:
        dialect = DIALECTS.get(ctx.path)   # before the edge: the path, which the edge matches exactly
        if dialect is not None:
            ctx.send = DialectSend(ctx.send, dialect, self._clock)


def build(clock: Callable[[], float]) -> DialectExitStage:
    return DialectExitStage(clock)
