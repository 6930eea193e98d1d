"""Relay one streamed answer, event by event, and end it honestly.

- The response head waits for the backend's first event: a stream that ends with no
  event at all is answered as a whole, 502 ``upstream_error``, and refunded.
- Every event is accounted (``reconcile/stream_usage.py``) before it is passed on; the
  usage-only chunk the gateway asked for on the client's behalf is dropped.
- ``data: [DONE]`` is held back and sent only once the backend's stream has ended cleanly
  with every choice finished. A stream cut short (connection lost, idle or duration
  limit, or a clean end with an unfinished choice: llama.cpp's ``interrupt_requests``
  sends ``[DONE]`` and hangs up) gets one in-band error event and no ``[DONE]``.
- A client that asked for ``include_usage`` gets a usage chunk before ``[DONE]`` even when
  the backend sent none (llama.cpp): the gateway's count, marked in the decision record.
- However the relay ends (a client that leaves included), ``ctx.usage`` is what the
  stream showed so far: reported, else counted; unknown only if nothing arrived; and
  clamped to what the request could use (pipeline/bounds.py).
- A stream larger than the request could justify (``answer_limit``), or a malformed event
  (broken SSE framing, data that is not a JSON object), is cut: an in-band
  ``upstream_error``; nothing past the limit, and no byte of the malformed event, is passed on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Protocol

from ..errors import Reason, Refusal
from ..http.responses import SSE_HEADERS, sse_error_event
from ..pipeline.context import RequestContext
from ..pipeline.lifecycle import State
from ..pipeline.stage import Exit, ExitKind
from ..pipeline.bounds import answer_limit
from .usage_report import bounded
from ..reconcile.stream_usage import DONE, MALFORMED, USAGE_ONLY, StreamUsage
from ..reconcile.usage import NOTHING_USED, UNKNOWN, Usage
from ._conn import UpstreamResponse, wake
from .client import UpstreamError
from .response_head import Response
from ..wire.sse import SseEvent, SseSplitter
from ..wire.codec import json_encode as _encode

if TYPE_CHECKING:
    from .prepare import UpstreamCall
    from .stream_clock import OpenStream, StreamClock


class StreamLimits(Protocol):
    """What the relay reads of the forwarder that calls it (forward.py): the loop's stream
    clock, and the limits it enforces (seconds)."""

    max_duration: float
    idle_timeout: float

    def clock(self) -> StreamClock: ...


def _usage_so_far(account: StreamUsage, prompt: int | None) -> Usage:
    if account.reported is not None or account.any_choice:
        return account.usage(prompt)
    return UNKNOWN  # nothing arrived that could be counted: the reservation stands


def usage_chunk(account: StreamUsage, usage: Usage) -> bytes:
    """An OpenAI usage-only chunk (``choices: []``) in the stream's own id and shape."""
    prompt = usage.prompt_tokens or 0
    completion = usage.completion_tokens or 0
    chunk = {"id": account.stream_id or "", "object": account.object or "chat.completion.chunk",
             "created": account.created or 0, "model": account.model or "", "choices": [],
             "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                       "total_tokens": prompt + completion}}
    return b"data: " + _encode(chunk) + b"\n\n"


async def _start(ctx: RequestContext) -> None:
    ctx.lifecycle.move(State.STREAMING)
    ctx.status = 200
    headers = SSE_HEADERS + [(b"x-request-id", ctx.request_id.encode())]
    await ctx.out.start_stream(200, headers)


_MESSAGES = {
    Reason.upstream_unavailable: "backend connection failed mid-stream",
    Reason.upstream_truncated: "the backend ended the stream before the answer was finished",
}
# upstream_error mid-stream: why the gateway cut the backend's stream
_TOO_LARGE = "the backend's stream is larger than this request allows"
_MALFORMED = "the backend sent an event that is not well-formed server-sent events with JSON data"


class _Relay:
    """One stream's state while it is relayed. A body part is taken by the relay's task
    (``resp.next_chunk``) or, once the response has started and while the task waits for
    the backend with the client ready to take bytes, straight from the upstream
    connection's parser (``take_now``, the response's ``sink``): no future, no wake-up of
    the task and no coroutine per part. Either way a part is accounted before it is passed
    on, and parts keep their order: the sink takes one only while the task is parked with
    nothing buffered."""

    def __init__(self, ctx: RequestContext, account: StreamUsage, drop_usage: bool, room: int | None,
                 stream: OpenStream, now: Callable[[], float]) -> None:
        self.account = account
        self.splitter = SseSplitter()
        self.outbound = ctx.out
        self.drop_usage = drop_usage
        self.room = room    # bytes the backend may still send (None: no bound); past it the stream is cut
        self.stream = stream
        self.now = now
        self.started = False
        self.done_event = b""
        self.ending: Reason | None = None
        self.cut: str | None = None       # why the gateway ended the stream (upstream_error)
        self.parked = False               # the task waits on the backend: the sink may take parts
        self.error: Exception | None = None   # raised while the sink took a part; the task re-raises it
        self.upstream: UpstreamResponse | None = None

    def events_of(self, chunk: bytes) -> list[SseEvent] | None:
        """Account for one body part; the events to pass on (None: it cut the stream)."""
        room = self.room
        if room is not None:
            room -= len(chunk)
            self.room = room
            if room < 0:
                self.ending, self.cut = Reason.upstream_error, _TOO_LARGE
                return None
        out, done, malformed = _events(self.account, self.splitter.feed(chunk), self.drop_usage)
        if done is not None:
            self.done_event = done   # sent only after a clean end
        if malformed:
            self.ending, self.cut = Reason.upstream_error, _MALFORMED
        return out

    def take_now(self, chunk: bytes) -> bool:
        if not self.parked or not self.outbound.ready_now():
            return False   # buffered for the task, which may wait for the client to drain
        self.stream.waiting_since = self.now()   # the backend was heard from just now
        try:
            out = self.events_of(chunk)
            if out:
                self.outbound.events_now(out)
        except Exception as exc:  # raised by the task, as if it had run there
            self.error = exc
        if (self.cut is not None or self.error is not None) and self.upstream is not None:
            self.parked = False
            wake(self.upstream)
        return True


async def relay_stream(fwd: StreamLimits, ctx: RequestContext, call: UpstreamCall, resp: Response) -> Exit:
    target = call.target
    account = StreamUsage(target.output_counter)
    work = ctx.work
    prompt = work.input_tokens if work is not None else None
    clock = fwd.clock()
    stream = clock.open(resp)
    now = clock.now
    relay = _Relay(ctx, account, not call.client_wants_usage,
                   answer_limit(ctx, target.answer_bytes_per_token, target.answer_slack_bytes), stream, now)
    upstream = resp if isinstance(resp, UpstreamResponse) else None
    try:
        while True:
            stream.waiting_since = now()
            try:
                if relay.parked:
                    await relay_parked(relay, upstream)
                    if relay.cut is not None:
                        break
                chunk = await resp.next_chunk(timeout=None)
            except UpstreamError as exc:
                relay.ending = stream.expired or Reason.upstream_unavailable
                ctx.note("upstream_error_detail", exc.detail)   # the record's, never the client's
                break
            stream.waiting_since = None
            if chunk is None:
                break
            out = relay.events_of(chunk)
            if out:
                if not relay.started:
                    await _start(ctx)
                    relay.started = True
                await relay.outbound.events(out)
            if relay.cut is not None:
                break
            if upstream is not None and relay.started:
                relay.parked = True   # from here the sink may take the parts
    finally:
        relay.parked = False
        if upstream is not None:
            upstream.sink = None
        clock.close(stream)
        ctx.usage = bounded(ctx, target, _usage_so_far(account, prompt))
    if account.unreadable:
        ctx.note("stream_unreadable_events", account.unreadable)
    ending = relay.ending
    cut = relay.cut
    if cut is not None:
        ctx.note("upstream_error_detail", cut)
    elif ending is None and (account.unfinished() or relay.splitter.finish().strip()):
        ending = Reason.upstream_truncated
    timed_out = stream.expired is not None
    return await _end(fwd, ctx, call, account, relay.started, ending, timed_out, relay.done_event, cut)


async def relay_parked(relay: _Relay, upstream: UpstreamResponse | None) -> None:
    """Wait while the sink takes the parts; back to the task's own reading when a part was
    left buffered, the stream ended or failed, or the sink cut it (raising what it raised)."""
    if upstream is None:
        return
    relay.upstream = upstream
    upstream.sink = relay.take_now
    try:
        await upstream.wait_more()
    finally:
        relay.parked = False
        upstream.sink = None
    if relay.error is not None:
        raise relay.error


def _events(account: StreamUsage, events: list[SseEvent], drop_usage: bool) -> tuple[list[SseEvent], bytes | None, bool]:
    """(the events to pass on, the ``[DONE]`` event if it came, whether a malformed event
    ended them: neither it nor anything after it is passed on)."""
    out: list[SseEvent] = []
    done = None
    for event in events:
        kind = account.observe(event)
        if kind == DONE:
            done = event.raw
        elif kind == MALFORMED:
            return out, done, True
        elif kind != USAGE_ONLY or not drop_usage:
            out.append(event)
    return out, done, False


async def _end(fwd: StreamLimits, ctx: RequestContext, call: UpstreamCall, account: StreamUsage, started: bool,
               ending: Reason | None, timed_out: bool, done_event: bytes, cut: str | None = None) -> Exit:
    """How the stream ends for the client: an error envelope (nothing was sent yet), an
    in-band error event (the 200 is out), or the usage chunk if due and ``[DONE]``."""

    outbound = ctx.out
    failed = ExitKind.STREAM_TIMEOUT if timed_out else ExitKind.UPSTREAM_FAILED
    if not started:
        if ending is None:
            # A 200 with no event at all: the backend generated nothing we could see.
            refusal = Refusal(Reason.upstream_error, "the backend answered 200 with an empty stream")
            if account.reported is None:
                ctx.usage = NOTHING_USED
            kind = ExitKind.UPSTREAM_FAILED
        else:
            refusal = Refusal(ending, _message(fwd, ctx, ending, cut))
            kind = failed
        await outbound.refusal(ctx.refused_by("forward", refusal))
        return Exit(kind, refusal.reason.name, ctx.usage)
    if ending is not None:
        refusal = ctx.refused_by("forward", Refusal(ending, _message(fwd, ctx, ending, cut)))
        ctx.status = 200  # the client already has a 200; the reason travels in-band
        await outbound.end_stream(sse_error_event(refusal))
        return Exit(failed, ending.name, ctx.usage)
    tail = b""
    if call.client_wants_usage and account.reported is None:
        tail = usage_chunk(account, ctx.usage)
        ctx.note("usage_chunk", "gateway")
    await outbound.end_stream(tail + done_event)
    return Exit(ExitKind.COMPLETED, None, ctx.usage)


def _message(fwd: StreamLimits, ctx: RequestContext, reason: Reason, cut: str | None) -> str:
    if reason is Reason.stream_duration_exceeded:
        text = f"stream exceeded its maximum duration of {fwd.max_duration:g}s"
    elif reason is Reason.stream_idle_timeout:
        text = f"backend sent nothing for {fwd.idle_timeout:g}s"
    else:
        text = cut or _MESSAGES[reason]
    return f"{text} (request {ctx.request_id})"
