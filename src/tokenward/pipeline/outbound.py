"""The way out: everything a request that passed the stages sends back goes through here.

The runner builds one ``Outbound`` per request once every stage has admitted (or one of
them answered). It holds the client's ASGI ``send`` and the *response transforms* the
stages registered while admitting (``ctx.transforms``), applied newest first, the
reverse of stage order, as starlette composes a response by wrapping ``send``. The
forwarder writes a backend's answer through it, an answering stage (the cache) its own;
neither calls ``send`` itself, so a transform (restoring personal data) sees every byte
that leaves, whichever exit the request took.

A transform works on what the relay already has in hand: a whole JSON body as bytes, a
stream as a list of ``SseEvent`` (each keeps its exact bytes, so an event a transform
does not change costs it one check). ``finish`` is the end of a stream: what a transform
held back (the start of a placeholder, say) comes out there, before ``[DONE]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, Sequence

from ..errors import Refusal, refusal_body
from ..http.asgi import Send
from ..http.responses import JSON, reason_header, send_bytes, sse_error_event

if TYPE_CHECKING:
    from ..wire.sse import SseEvent


class ResponseTransform(Protocol):
    def whole(self, body: bytes) -> bytes:
        """A complete JSON answer (or error envelope); return it, changed or not."""

    def events(self, events: list[SseEvent]) -> list[SseEvent]:
        """Streamed events as they pass; may hold some text back for the next ones."""

    def finish(self) -> list[SseEvent]:
        """The stream ended: whatever was held back, as events."""

    def close(self, tail: bytes) -> bytes:
        """The stream's last bytes (a usage chunk and ``[DONE]``, or an error event): a
        transform that writes a stream's end in another shape (a dialect's closing events)
        rewrites them; ``EditsText`` and the others return them as they are."""


class Outbound:
    __slots__ = ("_send", "transforms", "request_id", "headers", "_cycle")

    def __init__(self, send: Send, transforms: Sequence[ResponseTransform], request_id: bytes,
                 headers: list[tuple[bytes, bytes]] | None = None) -> None:
        self._send = send
        self.transforms = transforms
        self.request_id = request_id
        # The request's response headers (ctx.response_headers: rate limits, the cache's
        # outcome, a clamped bound), added to every head that leaves: answer, stream, refusal.
        self.headers = headers
        # the server's request cycle behind ``send``, if it writes a body part without a
        # coroutine (ours: http/cycle.py ``send_body_now``)
        cycle = getattr(send, "__self__", None)
        self._cycle: Any = cycle if getattr(cycle, "supports_send_now", False) else None

    # -- whole answers ------------------------------------------------------------------
    async def whole(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        for transform in self.transforms:
            body = transform.whole(body)
        if self.headers:
            headers += self.headers
        await send_bytes(self._send, status, headers, body)

    async def refusal(self, refusal: Refusal, extra: Sequence[tuple[bytes, bytes]] = ()) -> None:
        """An error envelope. It passes the transforms too: a backend's message kept in it
        may quote the (masked) request."""
        headers = [JSON, (b"x-request-id", self.request_id), reason_header(refusal.reason)]
        headers.extend(refusal.headers)
        headers.extend(extra)
        await self.whole(refusal.status, headers, refusal_body(refusal))

    # -- streams ------------------------------------------------------------------------
    async def start_stream(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        if self.headers:
            headers += self.headers
        await self._send({"type": "http.response.start", "status": status, "headers": headers})

    def _transformed(self, events: list[SseEvent]) -> bytes:
        """``events`` through the transforms, as the bytes to send (empty: none left)."""
        for transform in self.transforms:
            events = transform.events(events)
        if not events:
            return b""
        return events[0].raw if len(events) == 1 else b"".join([e.raw for e in events])

    async def events(self, events: list[SseEvent]) -> None:
        body = self._transformed(events)
        if body:
            await self._send({"type": "http.response.body", "body": body, "more_body": True})

    def ready_now(self) -> bool:
        """``events_now`` can pass events on at once (the client is not being waited on)."""
        cycle = self._cycle
        return cycle is not None and bool(cycle.body_ready())

    def events_now(self, events: list[SseEvent]) -> None:
        """``events`` without a coroutine, once ``ready_now`` said yes (the stream relay's
        per-chunk path: upstream/stream_relay.py)."""
        body = self._transformed(events)
        if body:
            self._cycle.send_body_now(body)

    async def end_stream(self, tail: bytes = b"") -> None:
        """Flush what the transforms held back, then ``tail`` (a usage chunk and ``[DONE]``,
        or an error event), and end the response."""
        held: list[Any] = []
        transforms = self.transforms
        for i, transform in enumerate(transforms):
            flushed = transform.finish()
            # what an inner transform held back still passes the outer ones
            for outer in transforms[i + 1:]:
                flushed = outer.events(flushed)
            held += flushed
        for transform in transforms:
            tail = transform.close(tail)    # a dialect writes the stream's end itself
        if held:
            tail = b"".join([e.raw for e in held]) + tail
        await self._send({"type": "http.response.body", "body": tail, "more_body": False})

    async def end(self, refusal: Refusal, streaming: bool) -> None:
        """End the request with ``refusal`` however far its answer got: an error envelope
        before any byte left, an in-band error event and the stream's end after."""
        if streaming:
            await self.end_stream(sse_error_event(refusal))
        else:
            await self.refusal(refusal)
