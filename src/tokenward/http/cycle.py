"""One request on a connection of the gateway's server: the ASGI ``receive`` and ``send``.

The head of a response is held back and written with its first body bytes, so a whole
response is one write (``respond_now`` skips the ASGI messages altogether); every write
goes through the connection, which batches it with the loop pass's others (writes.py).
"""

from __future__ import annotations

import asyncio
from http import HTTPStatus
from typing import Callable, Final, Iterable, Protocol, TYPE_CHECKING

if TYPE_CHECKING:
    from .asgi import Message, Scope

CONTINUE: Final = b"HTTP/1.1 100 Continue\r\n\r\n"
_STATUS_LINES: Final = {s.value: b"HTTP/1.1 %d %s\r\n" % (s.value, s.phrase.encode()) for s in HTTPStatus}
_NO_BODY_STATUS: Final = frozenset((204, 304))
_FRAMING: Final = frozenset((b"content-length", b"transfer-encoding", b"connection"))
# Names the gateway itself writes on most responses, exactly as spelled here: none is a
# framing header in any case, so ``_head`` need not lower-case them (~0.1 us a header).
_ORDINARY: Final = frozenset((b"content-type", b"x-request-id", b"cache-control", b"retry-after", b"x-should-retry",
                       b"x-tokenward-cache", b"x-tokenward-reason",
                       b"x-ratelimit-limit-tokens", b"x-ratelimit-limit-requests", b"x-ratelimit-remaining-tokens",
                       b"x-ratelimit-remaining-requests", b"x-ratelimit-reset-tokens", b"x-ratelimit-reset-requests"))
_DISCONNECT: Final = {"type": "http.disconnect"}


def wake(waiter: asyncio.Future[None] | None) -> None:
    """Resolve a waiter that may be gone or already done."""
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


def status_line(status: int) -> bytes:
    line = _STATUS_LINES.get(status)
    return line if line is not None else b"HTTP/1.1 %d \r\n" % status


class Connection(Protocol):
    """What a request's cycle uses of its connection (server.py's ``HttpConnection``)."""

    loop: asyncio.AbstractEventLoop
    body_since: float | None
    write_paused: bool

    def write(self, data: bytes) -> None: ...

    def resume_reading(self) -> None: ...

    def body_drained(self, size: int) -> None: ...

    async def drain(self) -> None: ...

    def response_done(self, cycle: RequestCycle) -> None: ...


class RequestCycle:
    """One request on a connection: the ASGI ``receive`` and ``send`` callables."""

    __slots__ = ("conn", "scope", "body", "more_body", "body_returned", "waiter", "keep_alive", "expect_continue",
                 "head_only", "head", "started", "complete", "chunked", "remaining", "disconnected", "on_disconnect")

    supports_disconnect_hook = True
    supports_body_now = True   # ``body_now`` (the pipeline's read_body asks)
    supports_send_now = True   # ``body_ready`` and ``send_body_now`` (pipeline/outbound.py asks)

    def __init__(self, conn: Connection, scope: Scope, keep_alive: bool, expect_continue: bool) -> None:
        self.conn = conn
        self.scope = scope
        self.body: list[bytes] = []
        self.more_body = True
        self.body_returned = False  # the last body message went to the app; receive() now waits
        self.waiter: asyncio.Future[None] | None = None
        self.keep_alive = keep_alive
        self.expect_continue = expect_continue
        self.head_only = scope["method"] == "HEAD"
        self.head: bytes | None = None  # the response head, written with the first body bytes
        self.started = False
        self.complete = False
        self.chunked = False
        self.remaining = -1  # bytes still owed under a Content-Length; -1: none declared
        self.disconnected = False
        # Called (no arguments) if the client goes away before the response completes.
        self.on_disconnect: Callable[[], None] | None = None

    # -- fed by the connection -------------------------------------------------------------
    def _wake(self) -> None:
        waiter, self.waiter = self.waiter, None
        wake(waiter)

    def lost(self) -> None:
        self.disconnected = True
        self._wake()
        hook = self.on_disconnect
        if hook is not None and not self.complete:
            self.on_disconnect = None
            hook()

    # -- ASGI ------------------------------------------------------------------------------
    async def receive(self) -> Message:
        # Wait while there is nothing to hand over: no body bytes yet and more to come, or
        # the whole body already handed over (then only a disconnect ends the wait).
        while not (self.disconnected or self.complete) and (self.body_returned or (not self.body and self.more_body)):
            conn = self.conn
            if self.expect_continue:
                self.expect_continue = False
                if not self.started:
                    conn.write(CONTINUE)
                    if conn.body_since is not None:  # the body's clock starts when it may come
                        conn.body_since = conn.loop.time()
            conn.resume_reading()
            self.waiter = conn.loop.create_future()
            await self.waiter
        if self.disconnected or self.complete:
            return _DISCONNECT
        parts = self.body
        body = parts[0] if len(parts) == 1 else b"".join(parts)
        self.body = []
        if parts:
            self.conn.body_drained(len(body))
        if not self.more_body:
            self.body_returned = True
        return {"type": "http.request", "body": body, "more_body": self.more_body}

    def body_now(self) -> bytes | None:
        """The whole body, when it has all arrived and none of it was handed over yet: what
        ``receive`` would return at once as its only message, without a coroutine. None
        otherwise (more to come, already read, or the client gone): then ``receive``."""
        if self.more_body or self.body_returned or self.disconnected or self.complete:
            return None
        parts = self.body
        body = parts[0] if len(parts) == 1 else b"".join(parts)
        self.body = []
        if parts:
            self.conn.body_drained(len(body))
        self.body_returned = True
        return body

    async def send(self, message: Message) -> None:
        conn = self.conn
        if conn.write_paused and not self.disconnected:
            await conn.drain()
        if self.disconnected:
            return
        kind = message["type"]
        if not self.started:
            if kind != "http.response.start":
                raise RuntimeError(f"expected http.response.start, got {kind}")
            self.head = self._head(message["status"], message.get("headers", ()))
            self.started = True
            self.expect_continue = False
            return
        if kind != "http.response.body" or self.complete:
            raise RuntimeError(f"unexpected ASGI message {kind!r} after the response " +
                               ("completed" if self.complete else "started"))
        self._body(message.get("body", b""), bool(message.get("more_body", False)))

    def body_ready(self) -> bool:
        """A streamed body part can go out now through ``send_body_now``, with no wait for
        the client to drain (or it is dropped, the client having left)."""
        return self.started and not self.complete and (self.disconnected or not self.conn.write_paused)

    def send_body_now(self, body: bytes) -> None:
        """``send`` of an ``http.response.body`` with ``more_body`` once ``body_ready``
        said yes: no message dict, no coroutine (the stream relay's per-chunk path)."""
        if not self.disconnected:
            self._body(body, True)

    def _body(self, body: bytes, more: bool) -> None:
        conn = self.conn
        head = self.head
        if head is not None:
            self.head = None
        out = self._frame(body, more)
        if head is not None:
            out = head + out if out else head
        if out:
            conn.write(out)
        if not more:
            self._finish()

    def respond_now(self, status: int, headers: Iterable[tuple[bytes, bytes]], body: bytes) -> bool:
        """A whole response without the ASGI messages; False (nothing done) when it must
        wait for the client to drain, or was already started: then use ``send``."""
        if self.started or self.conn.write_paused or self.disconnected:
            return False
        head = self._head(status, headers)
        self.started = True
        self.expect_continue = False
        out = self._frame(body, False)
        self.conn.write(head + out if out else head)
        self._finish()
        return True

    def _head(self, status: int, headers: Iterable[tuple[bytes, bytes]]) -> bytes:
        parts = [status_line(status)]
        length_given = False
        for name, value in headers:
            if name in _ORDINARY:
                parts += (name, b": ", value, b"\r\n")
                continue
            lname = name.lower()
            if lname in _FRAMING:
                if lname == b"content-length":
                    self.remaining = int(value)
                    length_given = True
                else:  # framing and connection handling are ours to choose
                    if lname == b"connection" and b"close" in value.lower():
                        self.keep_alive = False
                    continue
            parts += (name, b": ", value, b"\r\n")
        extra = 0  # whole lines we add below
        if self.more_body:
            self.keep_alive = False  # answered before the body was all read: we will close, so say so
        if not self.keep_alive:
            parts.append(b"connection: close\r\n")
            extra += 1
        if status in _NO_BODY_STATUS:
            self.head_only = True  # never a body after these, whatever the app sends
        elif not length_given and not self.head_only:
            if self.scope["http_version"] == "1.1":
                self.chunked = True
                parts.append(b"transfer-encoding: chunked\r\n")
                extra += 1
            else:
                self.keep_alive = False  # an HTTP/1.0 body without a length ends with the connection
        parts.append(b"\r\n")
        head = b"".join(parts)
        # Each line we wrote ends in one CRLF; any other CR or LF came from a header value
        # or name (header injection). Two counts in C instead of four tests per header.
        lines = 2 + (len(parts) - 2 - extra) // 4 + extra  # status, headers, extras, blank line
        if head.count(b"\n") != lines or head.count(b"\r") != lines:
            raise RuntimeError("response header contains a line break")
        return head

    def _frame(self, body: bytes, more: bool) -> bytes:
        if self.head_only:
            return b""
        if self.chunked:
            if more:
                return b"%x\r\n%s\r\n" % (len(body), body) if body else b""
            return b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body) if body else b"0\r\n\r\n"
        if self.remaining >= 0:
            self.remaining -= len(body)
            if self.remaining < 0 or (not more and self.remaining):
                raise RuntimeError("response body does not match its content-length")
        return body

    def _finish(self) -> None:
        self.complete = True
        self.on_disconnect = None
        self._wake()
        self.conn.response_done(self)
