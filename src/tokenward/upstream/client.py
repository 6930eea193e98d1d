"""The gateway's hot-path upstream HTTP/1.1 client: a keep-alive pool of asyncio
Protocol connections parsed with httptools.

Why not aiohttp/httpx: a pass-through proxy spends most of its per-request budget in
the client. This one creates no task per request, one waiter future per wait (none
when data is already buffered), one timer handle per wait instead of wait_for, and
writes each request head as a single precomputed-prefix join.

Errors (all carry ``.detail``)::

    UpstreamError
      UpstreamConnectError   refused, DNS, TLS handshake: nothing of the request was sent
      UpstreamTimeout        .phase in {"connect", "pool", "read"}
      UpstreamProtocolError  malformed response, body cut short, or the connection lost after
                             the request was sent (the backend may be working on it)
        UpstreamNoAnswer     lost after the request was sent and before any byte of an answer
      UpstreamTooLarge       a body longer than the caller's ``read(limit=...)``

``.detail`` names the backend's address and the OS error: it is for the log and the
decision record, never for a client (forward.py answers a reason code and the request id).

A request that was handed to a connection is never sent again by the client: an inference
request is not idempotent, and a backend that got it may be generating. Only a connection
found dead before anything was written is replaced. (A pool of several targets may ask
another target when no byte of an answer came back: upstream/failover.py.) Idle connections are dropped after
``idle_timeout`` (below the common servers' keep-alive timeouts: uvicorn's is 5 s), so a
pooled connection is rarely one the backend is closing at that moment.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
from types import EllipsisType
from typing import Any
from urllib.parse import urlsplit

from tokenward.upstream._conn import TIMED_OUT, Conn, UpstreamResponse, expire
from tokenward.upstream.response_head import (
    UpstreamConnectError,
    UpstreamError,
    UpstreamNoAnswer,
    UpstreamProtocolError,
    UpstreamTimeout,
    UpstreamTooLarge,
)
from tokenward.upstream.deadlines import Deadlines
from tokenward.writes import WriteBatch, batch_for

__all__ = [
    "UpstreamConnectError",
    "UpstreamError",
    "UpstreamNoAnswer",
    "UpstreamPool",
    "UpstreamProtocolError",
    "UpstreamResponse",
    "UpstreamTimeout",
    "UpstreamTooLarge",
]

_SMALL_BODY = 64 * 1024  # below this, head + body are joined into one write; above, one writelines (no copy)
_DROP = frozenset((b"host", b"content-length", b"transfer-encoding"))  # ours to set
_BODYLESS = frozenset(("GET", "HEAD"))
_METHODS = {m: m.encode() for m in ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")}


class UpstreamPool:
    """Keep-alive HTTP/1.1 connections to one upstream origin (+ path prefix)."""

    def __init__(
        self,
        base_url: str,
        *,
        max_connections: int = 256,
        connect_timeout: float = 5.0,
        read_timeout: float = 60.0,
        pool_timeout: float = 5.0,
        ssl_context: ssl.SSLContext | None = None,
        max_idle: int | None = None,
        idle_timeout: float = 4.0,
    ) -> None:
        url = urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"upstream base_url must be http(s)://host[:port][/path], got {base_url!r}")
        tls = url.scheme == "https"
        self._host = url.hostname
        self._port = url.port or (443 if tls else 80)
        self._ssl = (ssl_context or ssl.create_default_context()) if tls else None
        self._max = max_connections
        self._max_idle = max_idle
        self._idle_timeout = idle_timeout
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._pool_timeout = pool_timeout
        # Bound on the first request, in the running loop: the loop, its write batch, read timeouts.
        self._bound = False
        self._loop: asyncio.AbstractEventLoop
        self._batch: WriteBatch
        self._deadlines: Deadlines
        self._idle: list[Conn] = []
        self._waiters: collections.deque[asyncio.Future[Any]] = collections.deque()
        self._open = 0
        self._closed = False
        self._prefix = url.path.rstrip("/").encode("ascii")
        self._host_line = b" HTTP/1.1\r\nhost: " + _host_header(self._host, url.port, tls) + b"\r\n"

    @property
    def stats(self) -> dict[str, int]:
        waiting = sum(1 for fut in self._waiters if not fut.done())
        return {"open": self._open, "idle": len(self._idle), "waiting": waiting}

    async def request(
        self,
        method: str,
        path: str,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        *,
        timeout: float | None | EllipsisType = ...,   # ...: the pool's read_timeout
    ) -> UpstreamResponse:
        """Send one request; return once the status line and headers are in.

        ``headers`` go out as given (lowercase names, values the caller has vetted:
        no CR/LF); host, content-length and transfer-encoding among them are dropped
        because the client owns the framing. ``timeout`` bounds the wait for the
        headers (default: the pool's read_timeout; None waits forever).
        """
        if timeout is ...:
            timeout = self._read_timeout
        if not self._bound:
            self._loop = asyncio.get_running_loop()
            self._batch = batch_for(self._loop)
            self._deadlines = Deadlines(self._loop, expire)
            self._bound = True
        data = self._encode(method, path, headers, body)
        head = method == "HEAD"
        conn = await self._acquire(False)
        resp = UpstreamResponse(self)
        conn.send(resp, data, head)
        try:
            await resp._headers(timeout)
        except UpstreamConnectError:
            if not resp._stale:
                raise
            # a pooled connection found closed before the request was written to it: the
            # request never left, so one retry on a fresh connection is safe for any method
            conn = await self._acquire(True)
            resp = UpstreamResponse(self)
            conn.send(resp, data, head)
            await resp._headers(timeout)
        return resp

    async def aclose(self) -> None:
        """Close idle connections and refuse new requests; in-flight responses finish."""
        self._closed = True
        waiters, self._waiters = self._waiters, collections.deque()
        for fut in waiters:
            if not fut.done():
                fut.set_exception(UpstreamConnectError("upstream pool is closed"))
        for conn in list(self._idle):
            conn.close()
        await asyncio.sleep(0)  # let the transports finish closing

    # -- request encoding -------------------------------------------------------------

    def _encode(
        self, method: str, path: str, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> bytes | tuple[bytes, bytes]:
        if not path.isprintable() or " " in path:
            raise ValueError(f"invalid request path {path!r}")
        if path[:1] != "/":
            path = "/" + path
        verb = _METHODS.get(method)
        if verb is None:
            if not (method.isascii() and method.isalpha()):
                raise ValueError(f"invalid request method {method!r}")
            verb = method.encode()
        parts = [verb, b" ", self._prefix, path.encode("ascii"), self._host_line]
        for name, value in headers:
            if name not in _DROP:
                parts += (name, b": ", value, b"\r\n")
        size = len(body)
        if size or method not in _BODYLESS:
            parts.append(b"content-length: %d\r\n\r\n" % size)
        else:
            parts.append(b"\r\n")
        if size <= _SMALL_BODY:
            parts.append(body)
            return b"".join(parts)
        return b"".join(parts), body

    # -- connection accounting ----------------------------------------------------------
    # _open counts connections holding a slot, including ones still connecting. A slot
    # freed while requests wait is handed to the first waiter (FIFO) instead of being
    # returned, and so is a reusable connection.

    async def _acquire(self, fresh: bool) -> Conn:
        if self._closed:
            raise UpstreamConnectError("upstream pool is closed")
        idle = self._idle
        if idle and not fresh:
            stale_before = self._loop.time() - self._idle_timeout
            while idle:
                conn = idle.pop()  # LIFO: the warmest connection, least likely timed out
                conn.idle = False
                if conn.usable() and conn.idle_since > stale_before:
                    conn.reused = True
                    return conn
                conn.kill()
        if self._open < self._max:
            self._open += 1
            return await self._connect()
        if idle:  # fresh wanted but all slots held: trade the oldest idle one's slot
            old = idle.pop(0)
            old.idle = old.counted = False
            old.close()
            return await self._connect()
        return await self._wait_turn()

    async def _wait_turn(self) -> Conn:
        loop = self._loop
        fut = loop.create_future()
        self._waiters.append(fut)
        limit = self._pool_timeout
        timer = None if limit is None else loop.call_later(limit, expire, fut)
        try:
            got = await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                self._give_back(fut.result())
            self._forget(fut)
            raise
        finally:
            if timer is not None:
                timer.cancel()
        if got is TIMED_OUT:
            self._forget(fut)
            raise UpstreamTimeout(f"no upstream connection free within {limit}s", "pool")
        if got is None:
            return await self._connect()
        conn: Conn = got   # a connection handed over by _give_back
        conn.reused = True
        return conn

    def _forget(self, fut: asyncio.Future[Any]) -> None:
        try:
            self._waiters.remove(fut)
        except ValueError:
            pass

    def _give_back(self, got: Any) -> None:
        if got is None:
            self._release_slot()
        elif isinstance(got, Conn):
            self._release(got, True)

    async def _connect(self) -> Conn:
        """Open a connection on a slot the caller already holds."""
        conn = Conn(self)
        conn.counted = True
        try:
            async with asyncio.timeout(self._connect_timeout):
                await self._loop.create_connection(
                    lambda: conn, self._host, self._port, ssl=self._ssl,
                    server_hostname=self._host if self._ssl is not None else None,
                )
        except BaseException as exc:
            self._drop(conn)
            where = f"{self._host}:{self._port}"
            if isinstance(exc, TimeoutError):
                raise UpstreamTimeout(
                    f"connect to {where} timed out after {self._connect_timeout}s", "connect"
                ) from None
            if isinstance(exc, OSError):  # refused, DNS, TLS (ssl.SSLError is an OSError)
                raise UpstreamConnectError(f"cannot connect to {where}: {exc}") from exc
            raise
        return conn

    def _release(self, conn: Conn, keep: bool) -> None:
        """A response ended on ``conn``; reuse it if it is clean."""
        if keep and not conn.closed and not self._closed:
            if self._waiters and self._handoff(conn):
                return
            if self._max_idle is None or len(self._idle) < self._max_idle:
                conn.idle = True
                conn.idle_since = self._loop.time()
                self._idle.append(conn)
                return
        conn.close()

    def _drop(self, conn: Conn) -> None:
        """``conn`` is gone (idempotent): forget it and free its slot."""
        if conn.idle:
            conn.idle = False
            self._idle.remove(conn)
        if conn.counted:
            conn.counted = False
            self._release_slot()

    def _release_slot(self) -> None:
        if not self._handoff(None):
            self._open -= 1

    def _handoff(self, item: Conn | None) -> bool:
        waiters = self._waiters
        while waiters:
            fut = waiters.popleft()
            if not fut.done():
                fut.set_result(item)
                return True
        return False


def _host_header(host: str, port: int | None, tls: bool) -> bytes:
    name = f"[{host}]" if ":" in host else host
    if port is not None and port != (443 if tls else 80):
        name = f"{name}:{port}"
    try:
        return name.encode("ascii")
    except UnicodeEncodeError:
        return name.encode("idna")
