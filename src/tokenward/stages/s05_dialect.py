"""Dialect: OpenAI's Responses API and Anthropic's Messages API, parsed into the chat request.

On ``POST /v1/responses``, ``/v1/messages`` and ``/v1/messages/count_tokens`` (the
dialect's envelope is set up before the edge, by s01_dialect_exit.py), right after identity
(a stranger's body is never parsed), ``DialectStage``:

- parses the body with the dialect's strict schema (an unknown field is ``unknown_field``,
  named in the client's own terms);
- refuses what a chat backend cannot do (``previous_response_id``, ``store: true``,
  ``background``, built-in or server tools, ...) unless the model's upstream declares the
  dialect (``upstreams.NAME.dialects``);
- replaces the body with its chat-completions view and the route with a ``DialectRoute``
  that validates as chat: every later stage (entitlement, validation, work, admission,
  screening, personal data, cache, jobs) sees the chat request, unchanged;
- when the upstream serves the dialect, lists every text of the dialect body
  (dialects/*_doc.py ``document``), normalized as validation normalizes the chat view's:
  screening reads them and masking rewrites them (``DialectRoute.texts``), the work stage
  counts what the chat view leaves out and reserves the whole context for a stateful
  request, and the forward step sends the dialect body rendered from the parse as the
  stages left it (``DialectRoute.render``), never the client's bytes;
- registers ``TranslatedAnswer``, the response transform that writes the chat answer back
  in the dialect, whole and streamed. Registered first, it runs last on the way out: the
  restorer of personal data and the cache capture read chat, as they do on chat. When the
  upstream serves the dialect, ``DialectAnswer`` instead: the answer passes as the upstream
  wrote it, its usage read from the dialect's fields (dialects/native.py).

``count_tokens`` is answered after admission by s11_count_tokens.py.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping

import msgspec
from msgspec import UNSET

from ..config.schema import Config
from ..upstream.targets import TargetTable
from ..dialects import messages_translate, native, responses_schema
from ..dialects.common import encode
from ..dialects.document import Document
from ..dialects.messages_doc import Decisions
from ..dialects.native_edit import NativeEdit
from ..dialects.params import client_terms
from ..dialects.envelopes import anthropic_error_type
from ..dialects import parsed as dialect_parse
from ..dialects.common import Unsupported
from ..dialects.exit import DialectSend, TranslatedAnswer
from ..dialects.parsed import Parsed
from ..errors import Reason, Refusal
from ..http.responses import JSON
from ..pipeline.route import Checked, NativeCall
from ..pipeline.stage import BaseStage, Exit, ExitKind
from ..reconcile.usage import NOTHING_USED, Usage
from ..tokenize.registry import TokenizerRegistry
from ..upstream.usage_report import bounded
from ..validation.normalize import Normalizer
from ..validation.schemas import ChatCompletionRequest
from ..validation.result import NormalizedRequest
from ..validation.texts import TOOL_OUTPUT, TextUnit, chat_units
from ..wire.sse import SseEvent, SseSplitter

if TYPE_CHECKING:
    from ..pii.stream_edit import StreamTextEdit
    from ..pipeline.context import RequestContext
    from ..pipeline.outbound import ResponseTransform
    from ..upstream.targets import Target
    from ..pipeline.outbound import Outbound

CHAT_ROUTE = "/v1/chat/completions"
COUNT_TOKENS = "/v1/messages/count_tokens"
# the client's route -> its dialect
DIALECTS = {"/v1/responses": "responses", "/v1/messages": "messages", COUNT_TOKENS: "messages"}
# the backend's path when the upstream serves the dialect itself
NATIVE_PATHS = {"responses": "/responses", "messages": "/messages"}
NO_STORE = (b"cache-control", b"no-store")
_NO_NAMES: Mapping[str, str] = MappingProxyType({})   # the entitled names of a route with no namespace member


class DialectRoute:
    """The client's route (its path labels metrics and records), validated as chat, and
    forwarded as chat completions (translated) or, when the model's upstream serves the
    dialect, as the dialect rendered from its parse (``render``)."""

    __slots__ = ("path", "methods", "content_types", "max_body_bytes", "allow_header", "has_body",
                 "upstream_path", "validates", "dialect", "native", "native_path", "parsed", "doc", "count_tokens",
                 "forwarded_native", "entitled")

    def __init__(self, route: Any, dialect: str, native: bool, parsed: Parsed, doc: Document | None) -> None:
        self.path = route.path
        self.methods = route.methods
        self.content_types = route.content_types
        self.max_body_bytes = route.max_body_bytes
        self.allow_header = route.allow_header
        self.has_body = route.has_body
        self.validates = CHAT_ROUTE
        self.dialect = dialect
        self.native = native                # the model's upstream serves this dialect itself
        self.upstream_path = "/chat/completions"
        self.native_path = NATIVE_PATHS[dialect]
        self.parsed = parsed                # the dialect's parse: what a native body is rendered from
        self.doc = doc                      # its texts and what it holds beyond the chat view (native)
        self.count_tokens = route.path == COUNT_TOKENS
        self.forwarded_native = False
        # chat name -> the name the plan entitles it by, for a namespace's members
        self.entitled = ({tool.chat_name: tool.entitled for tool in parsed.flat if tool.namespace is not None}
                         if isinstance(parsed, responses_schema.Parsed) and parsed.flat else _NO_NAMES)

    @property
    def stateful(self) -> bool:
        return self.doc is not None and self.doc.stateful

    def texts(self, request: NormalizedRequest) -> list[TextUnit]:
        """What screening reads and masking rewrites: the chat view that a chat upstream
        receives, or every text of the dialect body a native upstream receives (with the
        text validation extracted from its files)."""
        doc = self.doc
        if doc is None:
            return chat_units(request)
        units = list(doc.units)
        files = [a for a in request.attachments if a.text]
        for make, attachment in zip(doc.attachments, files):
            units.append(TextUnit([make(attachment.text)], TOOL_OUTPUT))
        return units

    def outside_prompt(self) -> tuple[list[str], int]:
        doc = self.doc
        return (doc.outside, doc.opaque_bytes) if doc is not None else ([], 0)

    def entitled_name(self, name: str) -> str:
        """A Responses namespace's member is entitled as NAMESPACE.TOOL (chat: NAMESPACE__TOOL)."""
        return self.entitled.get(name, name)

    def client_terms(self, refusal: Refusal) -> Refusal:
        """A later stage's refusal names the chat view's field: named again as the client's."""
        parsed, native = self.parsed, self.native

        def again(marks: dict[int, str]) -> dict[str, Any]:
            return dialect_parse.chat_request(parsed, native, marks)
        return client_terms(refusal, self.dialect, again)

    def edit_answer(self, editor: StreamTextEdit) -> ResponseTransform:
        """A translated answer is chat when editors read it; a native one is the dialect's."""
        return editor if self.doc is None else NativeEdit(editor)

    def render(self, checked: Checked, backend_model: str | None) -> NativeCall | None:
        """The dialect body for a native upstream, from the parse as the stages left it
        (masked texts, the output bound, tools removed, a server-side system prompt, the
        backend's model name); None when the chat view goes, translated."""
        doc = self.doc
        if doc is None:
            return None
        body = checked.request.body if checked.request is not None else None
        bound = body.max_tokens if isinstance(body, ChatCompletionRequest) else None
        screening = checked.screening
        entitlement = checked.entitlement
        decisions = Decisions(
            model=backend_model, max_tokens=bound if isinstance(bound, int) else None,
            tools_removed=screening is not None and screening.restrict,
            system_prompt=entitlement.system_prompt if entitlement is not None else None)
        self.forwarded_native = True
        return NativeCall(self.native_path, dialect_parse.render(self.parsed, doc, decisions))


class DialectStage(BaseStage):
    on_routes: ClassVar[frozenset[str] | None] = frozenset(DIALECTS)   # the runner calls it on these only
    name = "dialect"
    needs = frozenset({"route"})
    writes = frozenset({"route"})

    def __init__(self, config: Config, clock: Callable[[], float], counters: dict[str, Any] | None = None,
                 targets: TargetTable | None = None) -> None:
        self._clock = clock
        self._counters = counters or {}
        self._targets = targets
        # model -> the dialects its upstream serves natively
        self._native = {name: frozenset(config.upstreams[spec.upstream].dialects)
                        for name, spec in config.models.items()}

    def decide(self, ctx: RequestContext) -> Refusal | None:
        route = ctx.route
        dialect = DIALECTS.get(route.path) if route is not None else None
        if dialect is None:
            return None
        if not isinstance(ctx.send, DialectSend):
            ctx.send = DialectSend(ctx.send, dialect, self._clock)
        ctx.note("dialect", dialect)
        count_tokens = dialect == "messages" and ctx.path == COUNT_TOKENS
        try:
            parsed, gaps = dialect_parse.parse(dialect, ctx.body, count_tokens)
            model = parsed.request.model
            native = not count_tokens and dialect in self._native.get(model, ())
            if gaps and not native:
                return gaps[0].refusal()
            blocking = [gap for gap in gaps if not gap.native]
            if blocking:
                return _not_yet(blocking[0])
            if gaps:
                refusal = _upstream_tools(parsed, ctx)
                if refusal is not None:
                    return refusal
            doc = None
            if native:
                doc = dialect_parse.document(parsed)
                refusal = None if _ascii_strings(ctx.body) else _normalize(doc, ctx)
                if refusal is not None:
                    return refusal
            chat = dialect_parse.chat_request(parsed, native)
        except Refusal as refusal:
            return refusal
        if count_tokens:
            chat["max_tokens"] = 1      # counted, never generated: the smallest output bound
        ctx.body = encode(chat)
        ctx.route = dialect_route = DialectRoute(route, dialect, native, parsed, doc)
        if native:
            # the cache keeps chat answers; a native one is in the dialect's shape: no lookup,
            # no storage (the cache stage reads the first cache-control header)
            ctx.headers = [NO_STORE, *ctx.headers]
            ctx.note("native", {"stateful": doc.stateful} if doc is not None and doc.stateful else True)
        if count_tokens:
            return None
        answer = TranslatedAnswer(dialect, parsed, lambda: input_tokens(ctx), self._clock,
                                  lambda: _charged(ctx), lambda: _output_bound(ctx))
        target = self._targets.get(model) if native and self._targets is not None else None
        ctx.add_transform(DialectAnswer(ctx, dialect_route, answer, target, self._counters.get(model))
                          if target is not None else answer)
        return None


def _ascii_strings(body: bytes) -> bool:
    """Every string the JSON ``body`` holds is ASCII: its bytes are, and no ``\\u`` escape
    stands for another character (a ``\\\\u`` makes this say no, and the texts are read).
    Normalization leaves an ASCII text as it is, so there is nothing to normalize."""
    return body.isascii() and b"\\u" not in body


def _normalize(doc: Document, ctx: RequestContext) -> Refusal | None:
    """A native body's texts in the canonical form validation gives the chat view's
    (hidden characters stripped or refused, NFKC): what is screened is what is sent."""
    principal = ctx.principal
    refuse = principal is not None and principal.plan.hidden_characters == "refuse"
    norm = Normalizer(refuse)
    try:
        for unit in doc.units:
            for piece in unit.pieces:
                text = piece.text
                if not text.isascii():
                    new = norm.text(text, "a text of the request")
                    if new is not text:
                        piece.write(new)
            if not unit.text.isascii():
                unit.text = "".join([p.text for p in unit.pieces])
    except Refusal as refusal:
        return refusal
    if norm.hidden:
        ctx.note("hidden_characters", norm.hidden)
    return None


def _upstream_tools(parsed: Parsed, ctx: RequestContext) -> Refusal | None:
    """Tools the upstream runs itself (web search, code execution, ...) are not function
    tools the plan's ``allow_tools`` names: a plan enables them with ``features: [server_tools]``."""
    kinds = parsed.builtin_tools if isinstance(parsed, responses_schema.Parsed) else parsed.server_tools
    principal = ctx.principal
    if not kinds or (principal is not None and "server_tools" in principal.plan.features):
        return None
    return Refusal(Reason.feature_not_entitled, f"tools the upstream runs itself (`{kinds[0]}`) are not enabled on "
                   "your plan (features: server_tools)", param="tools")


def _not_yet(gap: Unsupported) -> Refusal:
    """A feature whose content the chat view cannot hold (a stored item or file named by id,
    ...): the gateway could not count or screen it, so it is not forwarded even natively."""
    return Refusal(Reason.invalid_field, f"{gap.message}; the gateway does not forward it, even to an upstream "
                   "that serves the API natively, since it could not count or screen it", param=gap.param)


class DialectAnswer:
    """The response transform of a request whose upstream serves its dialect: translated
    back when the chat view went (``TranslatedAnswer``); else the upstream's own answer,
    passed through, its usage read from the dialect's own fields (dialects/native.py) and
    clamped to the request's bounds as a chat backend's is (upstream/usage_report.py).

    Each event's data is read for its type, usage and sequence number only (``native.Event``:
    the decoder skips the rest). A delta event (text, tool input, thinking) is kept as its
    bytes and its text read only if the stream ends without the upstream's final count (then
    its text is counted): most streams end with it, and their texts are never decoded here."""

    __slots__ = ("ctx", "route", "translated", "target", "counter", "_usage", "_seq", "_deltas")

    def __init__(self, ctx: RequestContext, route: DialectRoute, translated: TranslatedAnswer, target: Target,
                 counter: Any = None) -> None:
        self.ctx = ctx
        self.route = route
        self.translated = translated
        self.target = target     # the model's upstream: usage out of bounds is counted against it
        self.counter = counter   # the model's tokenizer: a stream that reports no usage is counted
        self._usage = native.StreamUsage(route.dialect)
        self._seq = 0      # the next sequence number of a native Responses stream
        self._deltas: list[bytes] = []   # the data of the delta events, as they came

    def _relayed_text(self) -> str:
        texts = []
        for data in self._deltas:
            try:
                decoded = msgspec.json.decode(data)
            except msgspec.DecodeError:
                continue
            found = native.text_delta(decoded) if isinstance(decoded, dict) else None
            if found is not None:
                texts.append(found[1])
                seq = decoded.get("sequence_number")
                if isinstance(seq, int) and seq >= self._seq:
                    self._seq = seq + 1
        return "".join(texts)

    def _settle(self, counts: tuple[int, int] | None, final: bool) -> None:
        """Usage as reported; a stream cut short (or whose count never came) is charged the
        larger of what was reported so far and the relayed text counted with the model's
        tokenizer, as a chat stream is (reconcile/stream_usage.py)."""
        ctx = self.ctx
        counted = None
        if not final and self._deltas and self.counter is not None:
            counted = self.counter.count_uncached(self._relayed_text())
        if counts is not None:
            prompt, completion = counts
            if counted is not None and counted > completion:
                ctx.note("usage_counted", {"reported": completion, "relayed": counted})
                completion = counted
            usage = Usage(prompt, completion, "reported")
        elif counted is not None and ctx.work is not None:
            usage = Usage(ctx.work.input_tokens, counted, "counted")
        else:
            return
        ctx.usage = bounded(ctx, self.target, usage)

    def whole(self, body: bytes) -> bytes:
        if not self.route.forwarded_native:
            return self.translated.whole(body)
        self._settle(native.answer_usage(self.route.dialect, body), True)
        return body

    def events(self, events: list[SseEvent]) -> list[SseEvent]:
        if not self.route.forwarded_native:
            return self.translated.events(events)
        deltas = self._deltas
        for event in events:
            data = event.data
            if not data or data[:1] != b"{":
                continue
            read = native.read_event(data)
            if read is None:
                continue
            if native.is_delta(read):
                deltas.append(data)     # its text read only if the stream ends without its final count
                continue
            self._usage.feed(read)
            seq = read.sequence_number
            if isinstance(seq, int):
                self._seq = seq + 1
        return events

    def finish(self) -> list[SseEvent]:
        return []

    def close(self, tail: bytes) -> bytes:
        """The end of a native stream: its usage settled; a gateway error event (the stream
        cut short) written as the dialect's ``error`` event."""
        if not self.route.forwarded_native:
            return self.translated.close(tail)
        self._settle(self._usage.counts, self._usage.final)
        out = []
        for event in SseSplitter().feed(tail):
            error = _chat_error(event)
            if error is None:
                continue     # nothing else of chat's ending belongs in a native stream
            code, message = error
            if self.route.dialect == "responses":
                self._relayed_text()    # the deltas' sequence numbers: the error follows them
                out.append(_event("error", {"type": "error", "sequence_number": self._seq, "code": code,
                                            "message": message, "param": None}))
            else:
                status = Reason[code].status if code in Reason.__members__ else 500
                out.append(_event("error", {"type": "error", "error": {
                    "type": anthropic_error_type(code, status), "message": message, "code": code}}))
        return b"".join(out)


def _chat_error(event: SseEvent) -> tuple[str, str] | None:
    try:
        decoded = msgspec.json.decode(event.data or b"null")
    except msgspec.DecodeError:
        return None
    error = decoded.get("error") if isinstance(decoded, dict) else None
    if not isinstance(error, dict):
        return None
    return str(error.get("code") or "upstream_error"), str(error.get("message") or "")


def _event(kind: str, payload: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + encode(payload) + b"\n\n"


def _charged(ctx: RequestContext) -> tuple[int, int] | None:
    """(prompt, completion) the request settles on, when both are known."""
    usage = ctx.usage
    if usage.prompt_tokens is None or usage.completion_tokens is None:
        return None
    return usage.prompt_tokens, usage.completion_tokens


def _output_bound(ctx: RequestContext) -> int | None:
    """The output bound the gateway sent (the client's, a plan's default, or clamped)."""
    body = ctx.request.body if ctx.request is not None else None
    bound = body.max_tokens if isinstance(body, ChatCompletionRequest) else None
    return bound if isinstance(bound, int) else None


def input_tokens(ctx: RequestContext) -> int:
    work = ctx.work
    return int(work.input_tokens) if work is not None else 0


def build(config: Config, clock: Callable[[], float], tokenizers: TokenizerRegistry,
          targets: TargetTable) -> DialectStage:
    return DialectStage(config, clock, tokenizers.counters, targets)

