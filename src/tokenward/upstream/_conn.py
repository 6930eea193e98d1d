"""The wire half of the upstream client: the error types, the response a caller
reads from, and the asyncio Protocol that feeds httptools for one TCP connection.

The response owns the body buffer and the one waiter future; the connection only
appends and wakes. The connection goes back to the pool the moment the last body
byte is parsed, so it is free for the next request even while the previous caller
is still consuming buffered data. ``client.py`` holds the pool and is the public face.
"""

from __future__ import annotations

import asyncio
from types import EllipsisType
from typing import Any, Callable

import httptools

from .response_head import (
    ExtraResponseBytes,
    ResponseHead,
    UpstreamConnectError,
    UpstreamError,
    UpstreamNoAnswer,
    UpstreamProtocolError,
    UpstreamTimeout,
    UpstreamTooLarge,
)


#: pause reading once this much body is buffered unread; resumed when the caller takes it.
HIGH_WATER = 1 << 20

TIMED_OUT = object()  # timer result: cheaper than an exception through the future
_FRAMING = (b"content-length", b"transfer-encoding")
_PARSE_ERRORS = (httptools.HttpParserError, httptools.HttpParserUpgrade)


def wake(resp: Any) -> None:
    waiter = resp._waiter
    if waiter is not None:
        resp._waiter = None
        if not waiter.done():
            waiter.set_result(None)


def expire(fut: asyncio.Future[Any]) -> None:
    if not fut.done():
        fut.set_result(TIMED_OUT)


class UpstreamResponse(ResponseHead):
    """Status and headers of an upstream response; the body is pulled with read(),
    next_chunk() or async iteration. The connection goes back to the pool as soon as
    the whole body has arrived; abort() drops it if the body is still incomplete."""

    __slots__ = (
        "status", "headers", "_pool", "_conn", "_chunks", "_size",
        "_headers_done", "_done", "_exc", "_waiter", "_stale", "sink",
    )

    def __init__(self, pool: Any) -> None:
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self._pool = pool
        self._conn: Conn | None = None
        self._chunks: list[bytes] = []
        self._size = 0
        self._headers_done = False
        self._done = False
        self._exc: UpstreamError | None = None
        self._waiter: asyncio.Future[Any] | None = None
        self._stale = False  # closed before any byte on a reused connection: retryable
        # Offered each body part before it is buffered (upstream/stream_relay.py): True if it
        # took the part, so its reader is neither woken nor handed it.
        self.sink: Callable[[bytes], bool] | None = None

    def __repr__(self) -> str:
        return f"<UpstreamResponse {self.status} complete={self._done}>"

    async def read(self, timeout: float | None | EllipsisType = ..., limit: int | None = None) -> bytes:
        """The rest of the body; ``timeout`` bounds the whole read (default: read_timeout).
        ``limit``: a body longer than this many bytes (its declared length, or what arrived)
        raises ``UpstreamTooLarge`` and drops the connection; no more of it is read."""
        if timeout is ...:
            timeout = self._pool._read_timeout
        parts = []
        deadline = None
        if limit is not None:
            declared = self.header(b"content-length")
            if declared is not None and declared.isdigit() and int(declared) > limit:
                self._too_large(limit)
        size = 0
        while True:
            if self._chunks:
                part = self._take()
                parts.append(part)
                if limit is not None:
                    size += len(part)
                    if size > limit:
                        self._too_large(limit)
            elif self._exc is not None:
                raise self._exc
            elif self._done:
                break
            elif timeout is None:
                await self._wait(None)
            else:
                # the deadline costs a clock read only when the body is not already here
                now = self._pool._loop.time()
                if deadline is None:
                    deadline = now + timeout
                await self._wait(max(deadline - now, 0.0))
        return parts[0] if len(parts) == 1 else b"".join(parts)

    async def next_chunk(self, timeout: float | None | EllipsisType = ...) -> bytes | None:
        """Whatever body data is buffered (waiting up to ``timeout`` for some), None at the end."""
        while True:
            if self._chunks:
                return self._take()
            if self._exc is not None:
                raise self._exc
            if self._done:
                return None
            await self._wait(self._pool._read_timeout if timeout is ... else timeout)

    async def wait_more(self) -> None:
        """Wait for something to read (data, the end, an error) or the sink's owner's wake."""
        if not self._chunks and self._exc is None and not self._done:
            await self._wait(None)

    def __aiter__(self) -> UpstreamResponse:
        return self

    async def __anext__(self) -> bytes:
        chunk = await self.next_chunk()
        if chunk is None:
            raise StopAsyncIteration
        return chunk

    def _too_large(self, limit: int) -> None:
        exc = UpstreamTooLarge(f"upstream response body exceeds {limit} bytes")
        self._abort(exc)
        self._chunks.clear()
        self._size = 0
        raise exc

    def abort(self) -> None:
        """Drop the connection now if the body is incomplete (the backend sees us go)."""
        self._abort(UpstreamError("response aborted by the gateway"))

    async def aclose(self) -> None:
        if not self._done:
            self.abort()

    # -- internals -------------------------------------------------------------------

    def _take(self) -> bytes:
        chunks = self._chunks
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        chunks.clear()
        self._size = 0
        conn = self._conn
        if conn is not None and conn.paused:
            conn.resume()
        return data

    async def _headers(self, timeout: float | None) -> None:
        while not self._headers_done:
            if self._exc is not None:
                raise self._exc
            await self._wait(timeout)

    async def _wait(self, timeout: float | None) -> None:
        pool = self._pool
        fut = pool._loop.create_future()
        self._waiter = fut
        if timeout is not None:
            pool._deadlines.add(fut, timeout)
        try:
            result = await fut
        except asyncio.CancelledError:
            # the caller gave up mid-response: the connection's state is unknown
            self._abort(UpstreamError("response abandoned by a cancelled task"))
            raise
        finally:
            self._waiter = None
            if timeout is not None:
                pool._deadlines.discard(fut)
        if result is TIMED_OUT:
            what = "the response body" if self._headers_done else "response headers"
            exc = UpstreamTimeout(f"upstream read timed out waiting for {what}", "read")
            self._abort(exc)
            raise exc

    def _abort(self, exc: UpstreamError) -> None:
        conn = self._conn
        if conn is None:
            return
        self._conn = None
        conn.resp = None
        conn.kill()
        self._fail(exc)

    def _fail(self, exc: UpstreamError) -> None:
        if self._exc is None:
            self._exc = exc
        wake(self)

    def _malformed(self, exc: Exception) -> None:
        if isinstance(exc, httptools.HttpParserUpgrade):
            self._fail(UpstreamProtocolError("upstream switched protocols (101), which is not supported"))
        else:
            self._fail(UpstreamProtocolError(f"malformed upstream response: {exc}"))

    def _lost(self, exc: Exception | None, rx: bool, reused: bool, written: bool = True) -> None:
        """The connection closed before the end of this response.

        ``written``: the request was handed to the transport. From then on the backend may
        have it (a POST to an inference server is not idempotent), so a loss is never
        retried and never reported as a connect error (which means "nothing was sent").
        """
        why = f": {exc}" if exc is not None else ""
        if self._headers_done and exc is None and not self._framed():
            self._done = True  # read-until-close body: EOF is its end
            wake(self)
        elif not rx and not written:
            self._stale = reused
            self._fail(UpstreamConnectError(f"upstream connection closed before the request was sent{why}"))
        elif not rx:
            self._fail(UpstreamNoAnswer(
                f"upstream closed the connection after the request was sent, before responding{why}"))
        elif not self._headers_done:
            self._fail(UpstreamProtocolError("upstream closed the connection inside the response headers"))
        else:
            self._fail(UpstreamProtocolError("upstream closed the connection before the end of the body"))

    def _framed(self) -> bool:
        return any(name in _FRAMING for name, _ in self.headers)


class Conn(asyncio.Protocol):
    __slots__ = (
        "pool", "transport", "parser", "resp", "rx", "paused", "counted", "idle",
        "closed", "reused", "keep", "head", "interim", "msg_done", "idle_since",
    )

    def __init__(self, pool: Any) -> None:
        self.pool = pool
        self.transport: Any = None
        self.parser = httptools.HttpResponseParser(self)
        self.resp: Any = None
        self.rx = False  # any byte of the current response seen (decides stale-retry)
        self.paused = False
        self.counted = False  # holds one of the pool's max_connections slots
        self.idle = False
        self.idle_since = 0.0  # loop time it went idle (an idle connection past the pool's limit is dropped)
        self.closed = False
        self.reused = False
        self.keep = True
        self.head = False
        self.interim = False
        self.msg_done = False

    # -- lifecycle -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        resp = self.resp
        if resp is not None:
            self.resp = None
            resp._conn = None
            resp._lost(exc, self.rx, self.reused)
        self.pool._drop(self)

    def usable(self) -> bool:
        return not self.closed and not self.transport.is_closing()

    def send(self, resp: Any, data: bytes | tuple[bytes, bytes], head: bool) -> None:
        self.rx = False
        self.keep = True
        self.head = head
        if self.closed:
            # died between being picked and used: nothing was written, safe to retry
            resp._lost(None, False, self.reused, written=False)
            return
        self.resp = resp
        resp._conn = self
        # Batched with the loop pass's other writes (see writes.py); close() only follows a
        # finished response, so no queued write can be overtaken by it.
        batch = self.pool._batch
        if type(data) is bytes:
            batch.write(self.transport, data)
        else:
            batch.write_parts(self.transport, data[0], data[1])

    def kill(self) -> None:
        """Close now without flushing, so the upstream sees us go, and free the slot."""
        self.closed = True
        if self.transport is not None:
            self.transport.abort()
        self.pool._drop(self)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()
        self.pool._drop(self)

    def resume(self) -> None:
        self.paused = False
        self.transport.resume_reading()

    # -- bytes in ----------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        resp = self.resp
        if resp is None:
            # bytes nobody asked for on an idle connection: the stream can't be trusted
            self.kill()
            return
        self.rx = True
        try:
            self.parser.feed_data(data)
        except _PARSE_ERRORS as exc:
            if not self.msg_done:
                self.resp = None
                resp._conn = None
                self.kill()
                resp._malformed(exc)
                return
            self.keep = False  # junk after a complete response
        if self.msg_done:
            self._finish(resp)
        elif resp._size > HIGH_WATER and not self.paused:
            self.paused = True
            self.transport.pause_reading()

    def _finish(self, resp: Any) -> None:
        self.msg_done = False
        self.resp = None
        resp._conn = None
        if self.head:
            # httptools cannot be told a HEAD response has no body; start clean instead
            self.parser = httptools.HttpResponseParser(self)
        if self.paused:
            self.resume()
        self.pool._release(self, self.keep)

    # -- httptools callbacks -----------------------------------------------------------

    def on_message_begin(self) -> None:
        if self.msg_done:
            raise ExtraResponseBytes

    def on_header(self, name: bytes, value: bytes) -> None:
        self.resp.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        resp = self.resp
        status = self.parser.get_status_code()
        if status < 200:
            # 100/103 are informational: forget them and parse the real response.
            # 101 makes httptools raise HttpParserUpgrade, reported as malformed.
            self.interim = True
            resp.headers = []
            return
        resp.status = status
        self.keep = self.parser.should_keep_alive()
        resp._headers_done = True
        if self.head:
            resp._done = True
            self.msg_done = True
        wake(resp)

    def on_body(self, body: bytes) -> None:
        resp = self.resp
        if resp._done:  # a body on a HEAD response: the peer is confused
            self.keep = False
            return
        sink = resp.sink
        if sink is not None and not resp._chunks and sink(body):
            return
        resp._chunks.append(body)
        resp._size += len(body)
        if resp._waiter is not None:
            wake(resp)

    def on_message_complete(self) -> None:
        if self.interim:
            self.interim = False
            return
        if self.head:
            return
        resp = self.resp
        resp._done = True
        self.msg_done = True
        wake(resp)
