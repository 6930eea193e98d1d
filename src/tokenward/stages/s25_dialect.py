"""Dialect: OpenAI's Responses API and Anthropic's Messages API, parsed into the chat request.

On ``POST /v1/responses``, ``/v1/messages`` and ``/v1/messages/count_tokens`` this stage,
right after identity:

- wraps the request's ``send`` (dialects/exit.py ``DialectSend``), so every response from
  here on carries the API's rate-limit headers and every refusal its error envelope;
- parses the body with the dialect's strict schema (an unknown field is ``unknown_field``,
  named in the client's own terms);
- refuses what a chat backend cannot do (``previous_response_id``, ``store: true``,
  ``background``, built-in or server tools, ...) unless the model's upstream declares the
  dialect (``upstreams.NAME.dialects``);
- replaces the body with its chat-completions translation and the route with a
  ``DialectRoute`` that validates as chat and forwards to ``/chat/completions``: every
  later stage (entitlement, validation, work, admission, screening, personal data, cache,
  jobs) sees the chat request, unchanged;
- registers ``TranslatedAnswer``, the response transform that writes the chat answer back
  in the dialect, whole and streamed. Registered first, it runs last on the way out: the
  restorer of personal data and the cache capture read chat, as they do on chat.

``count_tokens`` is answered by ``CountTokensStage`` (after work, before admission) with
the work stage's prompt count; nothing is forwarded and nothing reserved.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ..config.schema import Config
from ..dialects import messages_schema, messages_translate, responses_schema, responses_translate
from ..dialects.common import encode
from ..dialects.exit import DialectSend, TranslatedAnswer
from ..errors import Reason, Refusal
from ..http.responses import JSON
from ..pipeline.stage import BaseStage, Exit, ExitKind
from ..reconcile.usage import NOTHING_USED

if TYPE_CHECKING:
    from ..pipeline.context import RequestContext
    from ..pipeline.outbound import Outbound

CHAT_ROUTE = "/v1/chat/completions"
COUNT_TOKENS = "/v1/messages/count_tokens"
# the client's route -> its dialect
DIALECTS = {"/v1/responses": "responses", "/v1/messages": "messages", COUNT_TOKENS: "messages"}
# the backend's path when the upstream serves the dialect itself
NATIVE_PATHS = {"responses": "/responses", "messages": "/messages"}


class DialectRoute:
    """The client's route (its path labels metrics and records), validated and forwarded as
    chat completions, or forwarded natively."""

    __slots__ = ("path", "methods", "content_types", "max_body_bytes", "allow_header", "has_body",
                 "upstream_path", "validates", "dialect", "native", "original", "translated", "count_tokens")

    def __init__(self, route: Any, dialect: str, native: bool, original: bytes, translated: bytes) -> None:
        self.path = route.path
        self.methods = route.methods
        self.content_types = route.content_types
        self.max_body_bytes = route.max_body_bytes
        self.allow_header = route.allow_header
        self.has_body = route.has_body
        self.validates = CHAT_ROUTE
        self.dialect = dialect
        self.native = native
        self.upstream_path = NATIVE_PATHS[dialect] if native else "/chat/completions"
        self.original = original          # the client's body, forwarded as it is when native and untouched
        self.translated = translated      # the chat view as this stage wrote it
        self.count_tokens = route.path == COUNT_TOKENS


def _parse(dialect: str, body: bytes, count_tokens: bool) -> tuple[Any, list[Any]]:
    if dialect == "responses":
        parsed: Any = responses_schema.parse(body)
        return parsed, responses_translate.unsupported(parsed)
    parsed = messages_schema.parse(body, count_tokens=count_tokens)
    return parsed, messages_translate.unsupported(parsed)


class DialectStage(BaseStage):
    name = "dialect"

    def __init__(self, config: Config, clock: Callable[[], float]) -> None:
        self._clock = clock
        # model -> the dialects its upstream serves natively
        self._native = {name: frozenset(getattr(config.upstreams[spec.upstream], "dialects", ("chat",)))
                        for name, spec in config.models.items()}

    async def admit(self, ctx: RequestContext) -> Refusal | None:
        route = ctx.route
        dialect = DIALECTS.get(route.path) if route is not None else None
        if dialect is None:
            return None
        ctx.send = DialectSend(ctx.send, dialect, self._clock)
        ctx.note("dialect", dialect)
        count_tokens = route.path == COUNT_TOKENS
        original = ctx.body
        try:
            parsed, gaps = _parse(dialect, original, count_tokens)
            model = parsed.request.model
            native = not count_tokens and dialect in self._native.get(model, ())
            if gaps and not native:
                return gaps[0].refusal()
            if gaps:
                return _not_yet(gaps[0])
            chat = (responses_translate if dialect == "responses" else messages_translate).chat_request(parsed)
        except Refusal as refusal:
            return refusal
        if count_tokens:
            chat["max_tokens"] = 1      # counted, never generated: the smallest output bound
        translated = encode(chat)
        ctx.body = translated
        ctx.route = DialectRoute(route, dialect, native, original, translated)
        if native:
            ctx.note("dialect_native", True)
        elif not count_tokens:
            ctx.add_transform(TranslatedAnswer(dialect, parsed, lambda: _input_tokens(ctx), self._clock))
        return None


def _not_yet(gap: Any) -> Refusal:
    """A stateful or server-side feature asked of a native upstream: the gateway cannot
    count or screen what the chat view leaves out, so it is not forwarded yet."""
    refusal: Refusal = gap.refusal()
    refusal.message = f"{gap.message} (this gateway does not forward it even to a native upstream yet)"
    return refusal


def _input_tokens(ctx: RequestContext) -> int:
    work = ctx.work
    return int(work.input_tokens) if work is not None else 0


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
    """After work: a count_tokens request is answered with the work stage's prompt count
    (and a dialect request that validation and work did not see goes no further)."""

    name = "count_tokens"

    async def admit(self, ctx: RequestContext) -> Any:
        route = ctx.route
        if not isinstance(route, DialectRoute):
            return None
        if ctx.work is None:
            # the chat view was not validated and counted: never forwarded so
            return Refusal(Reason.internal_error, "internal error")
        return CountedTokens(_input_tokens(ctx)) if route.count_tokens else None


def build(services: Any) -> DialectStage:
    return DialectStage(services.config, services.clock)


def build_count(services: Any) -> CountTokensStage:
    return CountTokensStage()
