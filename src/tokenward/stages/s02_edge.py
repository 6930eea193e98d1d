"""Edge: exact route + method + content-type allowlist, header limits, and the raw-body cap.

Deny by default: only configured routes pass. The edge decides on the request head alone:
the body is read only once identity has verified the caller (``read_body``, called at the
end of the identity stage), so a stranger's body is never waited for. The body cap is
enforced while the body streams in, so an oversized body is refused without being
buffered: a declared Content-Length over the cap is refused here, on the head, and a
chunked body as soon as what arrived passes the cap.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Final, Sequence

from ..config.schema import Config
from ..errors import Reason, Refusal
from ..pipeline.route import Checked, NativeCall
from ..pipeline.stage import BaseStage, Deciding
from ..validation.result import NormalizedRequest
from ..validation.peek import STRICT_CHAT
from ..validation.texts import TextUnit, chat_units
from ..wire.request_body import StrictPeek

if TYPE_CHECKING:
    from ..pii.stream_edit import StreamTextEdit
    from ..pipeline.context import RequestContext
    from ..pipeline.outbound import ResponseTransform


class Route:
    """A configured route (pipeline/route.py ``Route``): its body is what goes upstream."""

    __slots__ = ("path", "methods", "content_types", "max_body_bytes", "allow_header", "has_body",
                 "upstream_path", "validates", "strict")
    stateful = False

    def __init__(self, path: str, methods: tuple[str, ...], content_types: tuple[str, ...],
                 max_body_bytes: int) -> None:
        self.path = path
        self.methods = frozenset(m.upper() for m in methods)
        self.content_types = frozenset(ct.lower().encode() for ct in content_types)
        self.max_body_bytes = max_body_bytes
        self.allow_header: tuple[tuple[bytes, bytes], ...] = ((b"allow", ", ".join(sorted(self.methods)).encode()),)
        self.has_body = bool(self.methods - {"GET", "HEAD", "DELETE"})
        # Backend base URLs end in /v1, so /v1/chat/completions goes to <base>/chat/completions.
        self.upstream_path = path[3:] if path.startswith("/v1/") else path
        self.validates = path
        # how the first peek of a body decodes it (wire/request_body.py): strictly, where
        # validation will anyway (the edge's build sets it), else None: leniently
        self.strict: StrictPeek | None = None

    def texts(self, request: NormalizedRequest) -> list[TextUnit]:
        return chat_units(request)

    def outside_prompt(self) -> tuple[Sequence[str], int]:
        return (), 0

    def render(self, checked: Checked, backend_model: str | None) -> NativeCall | None:
        return None

    def entitled_name(self, name: str) -> str:
        return name

    def client_terms(self, refusal: Refusal) -> Refusal:
        return refusal

    def edit_answer(self, editor: StreamTextEdit) -> ResponseTransform:
        return editor


def _media_type(value: bytes) -> bytes:
    return value.split(b";", 1)[0].strip().lower()


class EdgeStage(BaseStage):
    name = "edge"
    writes = frozenset({"route"})

    def __init__(self, config: Config, reads_body: bool = False) -> None:
        edge = config.edge
        # True only in a pipeline without the identity stage (a benchmark's edge alone):
        # then nobody else would read the body, and the edge reads it as it used to.
        self.reads_body = reads_body
        self.routes = {
            r.path: Route(r.path, r.methods, r.content_types,
                          min(r.max_body_bytes or edge.max_body_bytes, edge.max_body_bytes))
            for r in config.routes or ()
        }
        self.max_headers = edge.max_headers
        self.max_header_bytes = edge.max_header_bytes

    def decide(self, ctx: RequestContext) -> Deciding:
        route = self.routes.get(ctx.path)
        if route is None:
            return Refusal(Reason.route_denied, f"route {ctx.path} is not served by this gateway")
        if ctx.method not in route.methods:
            return Refusal(Reason.method_not_allowed, f"method {ctx.method} is not allowed on {ctx.path}",
                           headers=route.allow_header)
        refusal = self._check_headers(ctx)
        if refusal is not None:
            return refusal
        ctx.route = route
        if not route.has_body:
            return None
        if route.content_types:
            content_type = ctx.header(b"content-type")
            if content_type is None or _media_type(content_type) not in route.content_types:
                return Refusal(Reason.unsupported_media_type,
                               f"content-type must be one of: {', '.join(sorted(c.decode() for c in route.content_types))}")
        declared = ctx.header(b"content-length")
        if declared is not None:
            try:
                declared_len = int(declared)
            except ValueError:
                return Refusal(Reason.invalid_field, "invalid content-length header", param="content-length")
            if declared_len > route.max_body_bytes:
                return _too_large(route.max_body_bytes)
            if declared_len >= STRICT_PEEK_MIN_BYTES:
                ctx.parsed.strict = route.strict
        return read_body_now(ctx) if self.reads_body else None

    def _check_headers(self, ctx: RequestContext) -> Refusal | None:
        headers = ctx.headers
        if len(headers) > self.max_headers:
            return Refusal(Reason.headers_too_large, f"more than {self.max_headers} request headers")
        size = 0
        for name, value in headers:
            size += len(name) + len(value) + 4
        if size > self.max_header_bytes:
            return Refusal(Reason.headers_too_large, f"request headers exceed {self.max_header_bytes} bytes")
        return None


def read_body_now(ctx: RequestContext) -> Refusal | None | Coroutine[Any, Any, Refusal | None]:
    """``read_body`` without a coroutine where the server holds the whole body already
    (ours does when it came with the head: http/cycle.py ``body_now``); else the coroutine
    of ``read_body``, to await."""
    route = ctx.route
    if route is None or not route.has_body:
        return None
    cycle = getattr(ctx.receive, "__self__", None)   # the server's request cycle behind receive
    if getattr(cycle, "supports_body_now", False):
        body: bytes | None = cycle.body_now()  # type: ignore[union-attr]   # told by supports_body_now
        if body is not None:
            if len(body) > route.max_body_bytes:
                return _too_large(route.max_body_bytes)
            ctx.parsed.replace(body)
            return None
    return read_body(ctx)


async def read_body(ctx: RequestContext) -> Refusal | None:
    """Read the request body of a route that takes one (``ctx.route``, set by the edge) into
    ``ctx.body``, within the route's cap; the identity stage calls it once the caller is
    known. The server's slow-client limits (http/limits.py) bound how long it may take."""
    route = ctx.route
    if route is None or not route.has_body:
        return None
    cap = route.max_body_bytes
    receive = ctx.receive
    message = await receive()
    body = message.get("body", b"")
    if not message.get("more_body", False) and message["type"] == "http.request":
        if len(body) > cap:
            return _too_large(cap)
        ctx.parsed.replace(body)
        return None
    size = len(body)
    if size > cap:
        return _too_large(cap)
    parts = [body]
    while message.get("more_body", False):
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > cap:
            return _too_large(cap)
        parts.append(chunk)
    if message["type"] == "http.disconnect":
        return Refusal(Reason.client_disconnected, "client went away while sending the body")
    ctx.parsed.replace(b"".join(parts))
    return None


# The peek read off the strict decode (validation/peek.py) saves a second scan of the body,
# ~5 instructions a byte, but building it costs ~20K instructions (bench/instructions.py,
# --config full: 331K -> 353K a small request with it for every body): it pays from a few
# KiB; below this, the lenient peek. A body without a length (chunked) is peeked leniently.
STRICT_PEEK_MIN_BYTES: Final = 8192


def _too_large(cap: int) -> Refusal:
    return Refusal(Reason.body_too_large, f"request body exceeds {cap} bytes")


def build(config: Config, stage_names: frozenset[str]) -> EdgeStage:
    # Without an identity stage (benches that price a part), nothing else reads the body.
    edge = EdgeStage(config, reads_body="identity" not in stage_names)
    if "validation" in stage_names:   # it decodes chat bodies strictly: the peek reads that decode
        chat = edge.routes.get("/v1/chat/completions")
        if chat is not None:
            chat.strict = STRICT_CHAT
    return edge
