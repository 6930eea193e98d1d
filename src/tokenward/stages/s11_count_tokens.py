"""Count tokens: ``POST /v1/messages/count_tokens`` answered after admission.

The answer is the work stage's prompt count (``{"input_tokens": N}``): the request counts
against the plan's request rate like any request, its reservation (the prompt and one
output token) is settled at zero, and nothing is forwarded. On the other dialect paths, a
request that validation and work did not see goes no further.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from ..dialects import messages_translate
from ..errors import Reason, Refusal
from ..http.responses import JSON
from ..pipeline.stage import BaseStage, Exit, ExitKind
from ..reconcile.usage import NOTHING_USED
from .s05_dialect import DIALECTS, DialectRoute, input_tokens

if TYPE_CHECKING:
    from ..pipeline.context import RequestContext
    from ..pipeline.outbound import Outbound


class CountedTokens:
    """The answer of ``POST /v1/messages/count_tokens``: ``{"input_tokens": N}``."""

    __slots__ = ("tokens",)

    def __init__(self, tokens: int) -> None:
        self.tokens = tokens

    async def deliver(self, ctx: RequestContext, out: Outbound) -> Exit:
        ctx.status = 200
        headers = [JSON, (b"x-request-id", ctx.request_id.encode())]
        await out.whole(200, headers, messages_translate.count_tokens_body(self.tokens))
        return Exit(ExitKind.COMPLETED, None, NOTHING_USED)


class CountTokensStage(BaseStage):
    """After admission: a count_tokens request is answered with the work stage's prompt
    count (and a dialect request that validation and work did not see goes no further)."""
    on_routes: ClassVar[frozenset[str] | None] = frozenset(DIALECTS)   # the runner calls it on these only

    name = "count_tokens"
    needs = frozenset({"route", "work"})

    def decide(self, ctx: RequestContext) -> Refusal | CountedTokens | None:
        route = ctx.route
        if not isinstance(route, DialectRoute):
            return None
        if ctx.work is None:
            # the chat view was not validated and counted: never forwarded so
            return Refusal(Reason.internal_error, "internal error")
        return CountedTokens(input_tokens(ctx)) if route.count_tokens else None


def build() -> CountTokensStage:
    return CountTokensStage()
