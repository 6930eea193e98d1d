"""The mock upstream as a raw ASGI application: an OpenAI-compatible fake backend.

Requests that need no waiting take a lean path (one decode, one encode, two sends).
Anything that waits (hold, hang, delay, a token rate, stalls) runs as a child task
next to a watcher on ``receive()``: uvicorn's ``send()`` silently succeeds after the
client is gone, so only ``receive()`` can tell that generation must stop.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any, Awaitable, Callable, Coroutine

from .formats import (
    DEFAULT_MODELS,
    DONE,
    Plan,
    StreamFormat,
    build_plan,
    decode_body,
    embeddings_body,
    encode,
    error_body,
    full_body,
    models_body,
)
from . import echo, native
from .stats import Holds, Stats
from .steering import BadRequest, Steering, parse_steering, tool_arguments

# The ASGI callables' types, as http/asgi.py declares them for the gateway: mock/ sits in the
# bottom layer, below http/, and runs as a backend apart from it (its own process or uvicorn).
Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

CHAT, COMPLETION, EMBEDDINGS, MODELS = "chat", "completion", "embeddings", "models"
_V1_ROUTES = {
    ("POST", "/v1/chat/completions"): CHAT,
    ("POST", "/v1/completions"): COMPLETION,
    ("POST", "/v1/embeddings"): EMBEDDINGS,
    ("GET", "/v1/models"): MODELS,
    # Responses and Messages served natively (mock/native.py), for the gateway's dialects
    ("POST", "/v1/responses"): native.RESPONSES,
    ("POST", "/v1/messages"): native.MESSAGES,
}
_SSE_START = {
    "type": "http.response.start",
    "status": 200,
    "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
}
# Disconnects are checked at least this often when streaming at full speed.
_YIELD_EVERY = 64


class _Died(Exception):
    """Fallback for die-after when the server's transport is out of reach."""


class _Ctx:
    """State shared between a generation task and its disconnect watcher."""

    __slots__ = ("receive", "finished", "died")

    def __init__(self, receive: Receive) -> None:
        self.receive = receive
        self.finished = False  # the final body is being sent: a disconnect now is normal
        self.died = False  # the mock cut the connection itself: not a client cancel


async def send_json(send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if extra:
        headers.extend(extra)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _read_body(receive: Receive) -> bytes | None:
    """The whole request body, or None if the client left while sending it."""
    message = await receive()
    if message["type"] == "http.disconnect":
        return None
    body: bytes = message.get("body", b"")
    if not message.get("more_body"):
        return body
    chunks = [body]
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def _until_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _forever() -> None:
    await asyncio.get_running_loop().create_future()


class MockUpstream:
    """ASGI app: ``MockUpstream()(scope, receive, send)``; counters in ``.stats``."""

    def __init__(self, models: tuple[str, ...] | list[str] = DEFAULT_MODELS) -> None:
        self.stats = Stats()
        self.holds = Holds()
        self.models = tuple(models)
        self._models_body = models_body(self.models, int(time.time()))
        self._seq = itertools.count(1)
        self._mock_routes = {
            ("GET", "/_mock/stats"): self._get_stats,
            ("POST", "/_mock/reset"): self._reset,
            ("POST", "/_mock/release"): self._release,
        }

    @property
    def control_routes(self) -> list[tuple[str, str]]:
        """(method, path) of the mock's own controls, which a gateway serving it in-process
        answers on its own port (assemble/routes.py)."""
        return list(self._mock_routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind != "http":
            if kind == "lifespan":
                await _lifespan(receive, send)
            return
        method, path = scope["method"], scope["path"]
        route = _V1_ROUTES.get((method, path))
        if route is not None:
            self.stats.count(path)
            await self._v1(scope, receive, send, route)
            return
        if path.startswith("/v1/"):
            self.stats.count(path)
        handler = self._mock_routes.get((method, path))
        if handler is not None:
            await handler(receive, send)
            return
        await send_json(send, 404, error_body(404, f"no route for {method} {path}", "not_found"))

    # -- /v1 -----------------------------------------------------------------------

    async def _v1(self, scope: Scope, receive: Receive, send: Send, route: str) -> None:
        path, headers = scope["path"], scope["headers"]
        raw = await _read_body(receive)
        if raw is None:
            self.stats.cancelled += 1
            return
        body: Any = None
        try:
            steer = parse_steering(headers)
            if route != MODELS:
                body = decode_body(raw)
        except BadRequest as exc:
            self.stats.record(path, headers, None)
            await self._bad_request(send, exc)
            return
        self.stats.record(path, headers, body)
        if steer.status is not None:
            await self._steered_error(send, steer)
            return
        if steer.tool_once and steer.tool_call and native.holds_tool_result(route, body):
            steer.tool_call = None     # the round trip's last turn: text (steer is this request's own)
        if route in (native.RESPONSES, native.MESSAGES):
            await self._native(send, route, body, steer)
            return
        plan: Plan | None = None
        payload = b""
        try:
            if route == CHAT or route == COMPLETION:
                plan = build_plan(route == CHAT, body, steer)
            elif route == EMBEDDINGS:
                payload = embeddings_body(body)
            else:
                payload = self._models_body
        except BadRequest as exc:
            await self._bad_request(send, exc)
            return
        stream = plan is not None and bool(body.get("stream"))
        # a steered tool call on chat is echoed in pieces as the echo answer is (8 characters
        # when x-mock-echo does not say)
        size = steer.echo if steer.echo is not None else (8 if steer.tool_call and route == CHAT else None)
        if size is not None and plan is not None:
            await self._echo(send, steer, size, plan, body, stream, route == CHAT)
            return
        if steer.plain and not stream:
            if plan is not None:
                self.stats.tokens_generated += plan.tokens * plan.choices
                payload = full_body(plan, *self._new_id(plan))
            await send_json(send, 200, payload)
            return
        ctx = _Ctx(receive)
        await self._guard(ctx, self._steered(send, steer, ctx, plan, stream, payload))

    async def _echo(self, send: Send, steer: Steering, size: int, plan: Plan, body: dict[str, Any], stream: bool,
                    chat: bool) -> None:
        text = echo.echo_text(chat, body)
        ids = self._new_id(plan)
        args = tool_arguments(steer, text)
        if not stream:
            await send_json(send, 200, echo.full_body(plan, text, size, steer.tool_call, *ids, args=args))
            return
        await send(_SSE_START)
        for i, event in enumerate(echo.stream_events(plan, text, size, steer.tool_call, *ids, args=args)):
            if steer.die_after is not None and i >= steer.die_after:
                self.stats.died += 1
                raise _Died("x-mock-die-after")   # the connection drops: no finish, no [DONE]
            await send({"type": "http.response.body", "body": event, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _native(self, send: Send, route: str, body: dict[str, Any], steer: Steering) -> None:
        try:
            plan = native.plan_for(route, body, steer)
        except BadRequest as exc:
            await self._bad_request(send, exc)
            return
        rid, created = f"mock-{next(self._seq)}", int(time.time())
        stream = body.get("stream") is True
        tool = steer.tool_call
        if tool:
            args = tool_arguments(steer, native.last_text(route, body))
            answer = (native.responses_call(plan, rid, created, stream, tool, args) if route == native.RESPONSES
                      else native.messages_call(plan, rid, stream, tool, args))
        else:
            echoed = native.echo_pieces(route, body, steer.echo) if steer.echo is not None else None
            answer = (native.responses_answer(plan, rid, created, stream, not steer.no_usage, echoed)
                      if route == native.RESPONSES
                      else native.messages_answer(plan, rid, stream, echoed))
        self.stats.tokens_generated += plan.tokens
        if not stream:
            await send_json(send, 200, answer)
            return
        await send(_SSE_START)
        await send({"type": "http.response.body", "body": answer})

    async def _bad_request(self, send: Send, exc: BadRequest) -> None:
        self.stats.errors += 1
        await send_json(send, 400, error_body(400, str(exc), "invalid_request"))

    async def _steered_error(self, send: Send, steer: Steering) -> None:
        status = steer.status or 500
        self.stats.errors += 1
        extra = [(b"retry-after", steer.retry_after.encode())] if steer.retry_after else []
        message = f"mock upstream error (status {status})"
        shape = steer.error_body
        if shape == "json":
            await send_json(send, status, error_body(status, message), extra or None)
            return
        body = {"empty": b"", "text": f"<html>{message}</html>".encode(),
                "detail": encode({"detail": message})}[shape]
        kind = b"application/json" if shape == "detail" else b"text/html"
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", kind), (b"content-length", b"%d" % len(body))] + extra})
        await send({"type": "http.response.body", "body": body})

    def _new_id(self, plan: Plan) -> tuple[str, int]:
        prefix = "chatcmpl-mock-" if plan.chat else "cmpl-mock-"
        return f"{prefix}{next(self._seq)}", int(time.time())

    # -- waiting, generating, and watching the client --------------------------------

    async def _guard(self, ctx: _Ctx, work_coro: Coroutine[Any, Any, None]) -> None:
        """Run the work while watching for the client going away; stop work if it does."""
        work = asyncio.ensure_future(work_coro)
        watch = asyncio.ensure_future(_until_disconnect(ctx.receive))
        try:
            await asyncio.wait((work, watch), return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            work.cancel()
            watch.cancel()
            raise
        if work.done():
            if ctx.died:
                # Return only once the server has seen the abort, or uvicorn would log
                # "returned without completing response".
                await asyncio.wait((watch,), timeout=1.0)
            watch.cancel()
            work.result()
            return
        work.cancel()
        await asyncio.wait((work,))
        if not work.cancelled():
            work.exception()  # retrieved so asyncio does not log it; the client is gone
        if not ctx.finished:
            self.stats.cancelled += 1

    async def _steered(
        self, send: Send, steer: Steering, ctx: _Ctx, plan: Plan | None, stream: bool, payload: bytes
    ) -> None:
        if steer.hold is not None:
            await self.holds.wait(steer.hold)
        if steer.hang:
            await _forever()
        if plan is None:
            await self._delay(steer)
            if steer.cut_after is not None:
                await self._cut(steer, ctx)
                return
            ctx.finished = True
            await send_json(send, 200, payload)
            return
        self.stats.active_streams += 1
        try:
            if stream:
                await self._stream(send, steer, ctx, plan)
            else:
                await self._complete(send, steer, ctx, plan)
        finally:
            self.stats.active_streams -= 1

    async def _stream(self, send: Send, steer: Steering, ctx: _Ctx, plan: Plan) -> None:
        fmt = StreamFormat(plan, *self._new_id(plan))
        await self._delay(steer)
        await send(_SSE_START)
        if fmt.role:
            await send({"type": "http.response.body", "body": fmt.role, "more_body": True})
        cut = steer.cut_after
        steps = plan.tokens if cut is None else min(cut, plan.tokens)
        await self._tick(send, fmt.step, steps, plan.choices, steer.rate)
        if cut is not None:
            await self._cut(steer, ctx)
            return
        ctx.finished = True
        await send({"type": "http.response.body", "body": fmt.finish + fmt.usage + DONE})

    async def _complete(self, send: Send, steer: Steering, ctx: _Ctx, plan: Plan) -> None:
        await self._delay(steer)
        cut = steer.cut_after
        steps = plan.tokens if cut is None else min(cut, plan.tokens)
        await self._tick(None, b"", steps, plan.choices, steer.rate)
        if cut is not None:
            await self._cut(steer, ctx)
            return
        ctx.finished = True
        await send_json(send, 200, full_body(plan, *self._new_id(plan)))

    async def _tick(self, send: Send | None, chunk: bytes, steps: int, per_step: int, rate: float) -> None:
        """Produce ``steps`` tokens per choice, on a deadline schedule when rate > 0.

        Token i is due at t0 + i / rate, so time spent sending does not add up as drift.
        """
        stats = self.stats
        message = {"type": "http.response.body", "body": chunk, "more_body": True}
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        interval = 1.0 / rate if rate > 0 else 0.0
        for i in range(steps):
            if interval:
                wait = t0 + i * interval - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
            elif i % _YIELD_EVERY == _YIELD_EVERY - 1:
                await asyncio.sleep(0)
            stats.tokens_generated += per_step
            if send is not None:
                await send(message)

    @staticmethod
    async def _delay(steer: Steering) -> None:
        if steer.delay_ms > 0:
            await asyncio.sleep(steer.delay_ms / 1000.0)

    async def _cut(self, steer: Steering, ctx: _Ctx) -> None:
        """Stop sending: stall (keep the connection) or die (drop it), whichever is first."""
        die = steer.die_after
        if die is None or (steer.stall_after is not None and steer.stall_after < die):
            await _forever()
        self.stats.died += 1
        # uvicorn passes its per-request cycle's bound ``receive``; through its transport
        # the connection can be dropped mid-body, as when a backend process dies. close()
        # rather than abort(): the tokens already sent must reach the client (a reset
        # may discard them unread), and the missing end-of-body chunk is the fault.
        transport = getattr(getattr(ctx.receive, "__self__", None), "transport", None)
        if transport is None:
            raise _Died("x-mock-die-after")
        ctx.died = True
        transport.close()

    # -- /_mock --------------------------------------------------------------------

    async def _get_stats(self, receive: Receive, send: Send) -> None:
        await send_json(send, 200, encode(self.stats.snapshot(self.holds.count)))

    async def _reset(self, receive: Receive, send: Send) -> None:
        self.stats.reset()
        await send_json(send, 200, b'{"reset":true}')

    async def _release(self, receive: Receive, send: Send) -> None:
        raw = await _read_body(receive)
        if raw is None:
            return
        try:
            body = decode_body(raw) if raw.strip() else {}
            name = body.get("name")
            if name is not None and not isinstance(name, str):
                raise BadRequest("name: expected a string")
        except BadRequest as exc:
            await send_json(send, 400, error_body(400, str(exc), "invalid_request"))
            return
        released = self.holds.release(name)
        await send_json(send, 200, encode({"released": released}))


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
