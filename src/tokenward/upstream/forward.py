"""The last step: send an admitted request to its backend and relay the answer.

Non-streaming answers are relayed whole; streams are relayed event by event as they
arrive. Whatever happens, the backend connection is closed or returned to the pool
before this returns, so a client that goes away cancels the backend's work at once.
Returns the ``Exit`` the runner settles with.
"""

from __future__ import annotations

import asyncio

import msgspec

from ..config.schema import StreamConfig
from ..errors import Reason, Refusal
from ..http.responses import SSE_HEADERS, send_bytes, send_refusal, sse_error_event
from ..pipeline.context import RequestContext
from ..pipeline.lifecycle import State
from ..pipeline.stage import Exit, ExitKind
from ..reconcile.usage import UNKNOWN, Usage, from_reported
from .client import UpstreamConnectError, UpstreamError, UpstreamResponse, UpstreamTimeout
from .prepare import UpstreamCall, prepare
from .sse import SseTap
from .stream_clock import StreamClock
from .targets import TargetTable

_JSON_CT = (b"content-type", b"application/json")
_NOTHING_DONE = Usage(0, 0, "counted")


class _UsageOnly(msgspec.Struct):
    usage: object = None


_usage_of = msgspec.json.Decoder(_UsageOnly).decode


def _usage_from_body(body: bytes) -> Usage:
    try:
        return from_reported(_usage_of(body).usage)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return UNKNOWN


def _fail(ctx: RequestContext, reason: Reason, message: str) -> Refusal:
    ctx.deciding_stage = "forward"
    ctx.reason = reason.name
    ctx.status = reason.status
    return Refusal(reason, message)


async def _answer_failure(ctx: RequestContext, exc: UpstreamError, doing: str) -> Exit:
    """Map a backend failure before the client got a byte to its refusal, and answer it."""
    if isinstance(exc, UpstreamTimeout):
        reason, message, usage = Reason.upstream_timeout, f"backend did not {doing} in time", UNKNOWN
    else:
        reason, message = Reason.upstream_unavailable, f"backend unavailable: {exc.detail}"
        # A refused connection means the backend never saw the request.
        usage = _NOTHING_DONE if isinstance(exc, UpstreamConnectError) else UNKNOWN
    await send_refusal(ctx.send, _fail(ctx, reason, message), ctx.request_id.encode())
    return Exit(ExitKind.UPSTREAM_FAILED, reason.name, usage)


class Forwarder:
    def __init__(self, targets: TargetTable, stream: StreamConfig) -> None:
        self.targets = targets
        self.max_duration = stream.max_duration_s
        self.idle_timeout = stream.idle_timeout_s
        self._stream_clock: StreamClock | None = None

    def _clock(self) -> StreamClock:
        if self._stream_clock is None:
            loop = asyncio.get_running_loop()
            self._stream_clock = StreamClock(loop, self.idle_timeout, self.max_duration)
        return self._stream_clock

    async def __call__(self, ctx: RequestContext) -> Exit:
        call = prepare(ctx, self.targets, ctx.route.upstream_path)
        target = call.target
        headers = [_JSON_CT, (b"x-request-id", ctx.request_id.encode())]
        headers += target.auth_headers
        headers += target.allow.select(ctx.headers)
        watch = ctx.disconnect
        if watch is not None:
            watch.arm()
        timeout = min(target.read_timeout, self.max_duration)
        try:
            try:
                resp = await target.pool.request("POST", call.path, headers, call.body, timeout=timeout)
            except UpstreamError as exc:
                return await _answer_failure(ctx, exc, "answer")
            ctx.upstream_status = resp.status
            try:
                if call.stream and resp.status == 200:
                    return await self._relay_stream(ctx, call, resp)
                return await self._relay_whole(ctx, resp, timeout)
            finally:
                resp.abort()  # no-op when the body was read to the end
        finally:
            if watch is not None:
                watch.disarm()

    async def _relay_whole(self, ctx: RequestContext, resp: UpstreamResponse, timeout: float) -> Exit:
        try:
            body = await resp.read(timeout=timeout)
        except UpstreamError as exc:
            return await _answer_failure(ctx, exc, "finish")
        if resp.status < 400:
            ctx.usage = _usage_from_body(body)
        else:
            # The backend refused the work itself; nothing was generated.
            ctx.usage = _NOTHING_DONE
            ctx.deciding_stage = "forward"
            ctx.reason = Reason.upstream_error.name
        ctx.status = resp.status
        headers = [(b"content-type", resp.header(b"content-type") or b"application/json"),
                   (b"x-request-id", ctx.request_id.encode())]
        if ctx.response_headers:
            headers += ctx.response_headers
        await send_bytes(ctx.send, resp.status, headers, body)
        return Exit(ExitKind.COMPLETED, None, ctx.usage)

    async def _relay_stream(self, ctx: RequestContext, call: UpstreamCall, resp: UpstreamResponse) -> Exit:
        send = ctx.send
        ctx.lifecycle.move(State.STREAMING)
        ctx.status = 200
        headers = SSE_HEADERS + [(b"x-request-id", ctx.request_id.encode())]
        if ctx.response_headers:
            headers += ctx.response_headers
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        tap = SseTap(drop_usage_event=not call.client_wants_usage)
        clock = self._clock()
        stream = clock.open(resp)
        now = clock.now
        try:
            while True:
                stream.waiting_since = now()
                try:
                    chunk = await resp.next_chunk(timeout=None)
                except UpstreamError:
                    if stream.expired is not None:
                        return await self._end_stream(ctx, tap, stream.expired, ExitKind.STREAM_TIMEOUT)
                    return await self._end_stream(ctx, tap, Reason.upstream_unavailable, ExitKind.UPSTREAM_FAILED)
                stream.waiting_since = None
                if chunk is None:
                    break
                out = tap.feed(chunk)
                if out:
                    await send({"type": "http.response.body", "body": out, "more_body": True})
        finally:
            clock.close(stream)
        await send({"type": "http.response.body", "body": tap.finish(), "more_body": False})
        ctx.usage = tap.counted
        return Exit(ExitKind.COMPLETED, None, ctx.usage)

    async def _end_stream(self, ctx: RequestContext, tap: SseTap, reason: Reason, kind: ExitKind) -> Exit:
        messages = {
            Reason.stream_duration_exceeded: f"stream exceeded its maximum duration of {self.max_duration:g}s",
            Reason.stream_idle_timeout: f"backend sent nothing for {self.idle_timeout:g}s",
            Reason.upstream_unavailable: "backend connection failed mid-stream",
        }
        refusal = _fail(ctx, reason, messages[reason])
        ctx.status = 200  # the client already has a 200; the reason travels in-band
        ctx.usage = tap.counted
        body = tap.finish() + sse_error_event(refusal)
        await ctx.send({"type": "http.response.body", "body": body, "more_body": False})
        return Exit(kind, reason.name, ctx.usage)
