"""Two ways to exchange pipelined RESP with Redis; the Redis store uses one of them.

- ``RespClient`` (``store.client: resp``, the default): one multiplexed connection, an
  ``asyncio.Protocol`` feeding hiredis's reader. Each request writes its whole pipeline
  in one ``write`` (so requests never interleave) and waits for its replies, which Redis
  returns in order; under load many requests share each socket read. Measured ~14 us of
  CPU per call at c=32 on the benchmark machine, against ~38 us through redis-py's
  connection layer and ~75 us through redis-py's client (docs/benchmarks.md).
- ``RedisPyConnections`` (``store.client: redis-py``): a small LIFO pool of redis-py
  asyncio connections (hiredis parser, TLS, RESP3), one request per connection at a time.

Both take redis-py's URL parsing (``redis://``, ``rediss://`` with its ``ssl_*`` options,
``unix://``, user and password, database), raise ``ScriptMissing`` when a reply says
NOSCRIPT and ``StoreUnavailable`` for anything else that goes wrong, and bound every
exchange by the store timeout.

How the lean client rides out a slow store (a fork for BGSAVE, a paused process, a
failover), docs/budget.md "When the store is slow":

- **per-call deadlines**: each call fails alone when *its* timeout passes; the connection
  stays, and the reply that arrives late is matched to its (failed) call and dropped, so
  one slow reply never fails the calls behind it that the store then answers in time;
- the connection is dropped only when the store has been **silent** for ``dead_after``
  (ten timeouts, at least a second) while calls wait, or sends a reply out of step;
- **reconnect with backoff**: after a failed connect, calls fail fast until the next
  attempt is due (50 ms doubling to 2 s, reset on success), so a dead store is not
  hammered by every request;
- **backpressure**: while the socket's send buffer is full (the store is not reading) or
  ``MAX_WAITING`` calls wait, a new call fails at once instead of queuing without bound.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
from typing import Any, Awaitable, Callable, Generic, TypeVar

import hiredis
from redis.asyncio.connection import AbstractConnection, ConnectionPool, parse_url
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError, RedisError

# ScriptMissing lives in store.py: a compiled module may not define an exception class
from .store import ScriptMissing, StoreUnavailable

T = TypeVar("T")
# One exchange's replies as hiredis (or redis-py) decodes them: per command bytes, an int,
# None, an error, or a list of those. The command's sender knows which shape to expect.
Replies = list[Any]


class SingleFlight(Generic[T]):
    """One run of a coroutine at a time: callers that arrive while it runs wait for the
    same result (shielded: one caller's cancellation does not cut the others off)."""

    __slots__ = ("_make", "_running")

    def __init__(self, make: Callable[[], Awaitable[T]]) -> None:
        self._make = make
        self._running: asyncio.Future[T] | None = None

    async def __call__(self) -> T:
        if self._running is None:
            self._running = asyncio.ensure_future(self._make())
        running = self._running
        try:
            return await asyncio.shield(running)
        finally:
            if running.done():
                self._running = None


def _bulk(value: object) -> bytes:
    data = value if isinstance(value, bytes) else str(value).encode()
    return b"$%d\r\n%b\r\n" % (len(data), data)


def pack(*args: object) -> bytes:
    """One command in RESP."""
    return b"*%d\r\n" % len(args) + b"".join(map(_bulk, args))


def _error_in(replies: Replies) -> Exception | None:
    """The exception an exchange raises for its replies: the first error reply, if any."""
    for reply in replies:
        if isinstance(reply, hiredis.ReplyError):
            if str(reply).startswith("NOSCRIPT"):
                return ScriptMissing(str(reply))
            return StoreUnavailable(f"budget store: error reply: {reply}")
    return None


MAX_WAITING = 8192
_BACKOFF_FIRST_S, _BACKOFF_MAX_S = 0.05, 2.0


class _Protocol(asyncio.Protocol):
    """One multiplexed connection: replies are matched to waiters in order.

    Deadlines are judged by one watchdog per connection rather than a timer per call. A
    call past its deadline fails on its own (checked once more after the loop has read
    its sockets, so a gateway whose own event loop runs late under load does not mistake
    itself for a slow store); it keeps its place in the queue, and its reply is dropped
    when it comes. The connection is dropped only after ``dead_after`` of silence.
    """

    def __init__(self, timeout_s: float) -> None:
        self.reader = hiredis.Reader()
        # (future, replies expected, replies so far, sent at, error replies raised?)
        self.waiters: collections.deque[tuple[asyncio.Future[Replies], int, Replies, float, bool]] = collections.deque()
        self.transport: asyncio.Transport | None = None
        self.lost: BaseException | None = None
        self.timeout_s = timeout_s
        self._loop = asyncio.get_running_loop()
        self._progress = 0.0          # loop time something last arrived
        self._watch: asyncio.TimerHandle | None = None
        self._suspect = False
        self.dead_after = max(10 * timeout_s, 1.0)
        self.paused = False     # the transport's send buffer is full: the store is not reading
        # Writes made in one turn of the event loop go out in one system call.
        self._out: list[bytes] = []

    # typeshed's base takes any BaseTransport; a stream connection is handed a Transport
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.transport = transport

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False

    def data_received(self, data: bytes) -> None:
        self._progress = self._loop.time()
        self.reader.feed(data)
        waiters = self.waiters
        while True:
            try:
                reply = self.reader.gets()
            except hiredis.ProtocolError as exc:
                self._drop(exc)
                return
            if reply is False:
                return
            if not waiters:
                # A reply nobody asked for: this connection is out of step with our commands.
                self._drop(ConnectionError("the budget store sent a reply no command was waiting for"))
                return
            fut, count, replies, _, checked = waiters[0]
            replies.append(reply)
            if len(replies) == count:
                waiters.popleft()
                if not fut.done():   # a cancelled waiter still owns its replies
                    error = _error_in(replies) if checked else None
                    if error is None:
                        fut.set_result(replies)
                    else:
                        fut.set_exception(error)

    def connection_lost(self, exc: BaseException | None) -> None:
        if self.lost is None:
            self.lost = exc or ConnectionError("connection closed by the budget store")
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        while self.waiters:
            fut = self.waiters.popleft()[0]
            if not fut.done():
                fut.set_exception(StoreUnavailable(f"budget store: {self.lost}"))

    def _drop(self, exc: BaseException) -> None:
        self.connection_lost(exc)
        if self.transport is not None:
            self.transport.abort()

    def send(self, payload: bytes, count: int, checked: bool = True) -> asyncio.Future[Replies]:
        """The replies to ``payload``'s ``count`` commands, in a future; with ``checked``, an
        error reply fails it (ScriptMissing for NOSCRIPT, else StoreUnavailable)."""
        loop = self._loop
        fut: asyncio.Future[Replies] = loop.create_future()
        if self.paused or len(self.waiters) >= MAX_WAITING:
            fut.set_exception(StoreUnavailable("budget store: not keeping up (its connection is full)"))
            return fut
        now = loop.time()
        self.waiters.append((fut, count, [], now, checked))
        if self._watch is None:
            self._watch = loop.call_at(now + self.timeout_s, self._check)
        if not self._out:
            loop.call_soon(self._flush)
        self._out.append(payload)
        return fut

    def _flush(self) -> None:
        out, self._out = self._out, []
        if self.lost is None:
            transport = self.transport   # set: a call is sent only on a made connection
            assert transport is not None
            transport.write(b"".join(out) if len(out) > 1 else out[0])

    def _check(self) -> None:
        self._watch = None
        waiters = self.waiters
        if not waiters or self.lost is not None:
            self._suspect = False
            return
        now = self._loop.time()
        timeout = self.timeout_s
        overdue = [w for w in waiters if not w[0].done() and now - max(w[3], self._progress) >= timeout]
        if overdue and not self._suspect:
            # Let the loop read its sockets once before calling anything late.
            self._suspect = True
            self._watch = self._loop.call_later(0.001, self._check)
            return
        self._suspect = False
        for fut, *_ in overdue:
            if not fut.done():
                fut.set_exception(StoreUnavailable(f"budget store: no answer within {timeout * 1000:.0f} ms"))
        silent_since = max(waiters[0][3], self._progress)
        if now - silent_since >= self.dead_after:
            self._drop(TimeoutError(f"the store was silent for {self.dead_after:g} s"))
            return
        pending = [w[3] for w in waiters if not w[0].done()]
        due = min(pending) + timeout if pending else silent_since + self.dead_after
        self._watch = self._loop.call_at(max(min(due, silent_since + self.dead_after), now + 0.001), self._check)


def _tls_context(params: dict[str, Any]) -> ssl.SSLContext | None:
    """The TLS of a ``rediss://`` URL, from redis-py's parse of its ``ssl_*`` options."""
    from redis.asyncio.connection import SSLConnection

    if params.get("connection_class") is not SSLConnection:
        return None

    context = ssl.create_default_context(cafile=params.get("ssl_ca_certs"))
    if params.get("ssl_certfile"):
        context.load_cert_chain(params["ssl_certfile"], params.get("ssl_keyfile"))
    requirement = params.get("ssl_cert_reqs", "required")
    if requirement in ("none", ssl.CERT_NONE):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif params.get("ssl_check_hostname") in (False, "false", "False"):
        context.check_hostname = False
    return context


class RespClient:
    def __init__(self, url: str, timeout_s: float) -> None:
        self._params: dict[str, Any] = dict(parse_url(url))
        self.timeout_s = timeout_s
        self._protocol: _Protocol | None = None
        self._connect = SingleFlight(self._open)    # concurrent callers share one connect
        self._backoff = 0.0          # seconds to wait after the last failed connect
        self._retry_at = 0.0         # loop time before which calls fail without connecting

    @classmethod
    def from_params(cls, params: dict[str, Any], timeout_s: float) -> "RespClient":
        client = cls("redis://", timeout_s)
        client._params = dict(params)
        return client

    @property
    def params(self) -> dict[str, Any]:
        return self._params

    def exchange(self, payload: bytes, count: int) -> Awaitable[Replies]:
        """The replies (awaitable). Connected, that is the future itself: no coroutine frame
        of its own between the caller and the socket."""
        protocol = self._protocol
        if protocol is None or protocol.lost is not None:
            return self._exchange_connecting(payload, count, True)
        return protocol.send(payload, count)

    def exchange_raw(self, payload: bytes, count: int) -> Awaitable[Replies]:
        """Like ``exchange``, but error replies are returned, not raised."""
        protocol = self._protocol
        if protocol is None or protocol.lost is not None:
            return self._exchange_connecting(payload, count, False)
        return protocol.send(payload, count, checked=False)

    async def _exchange_connecting(self, payload: bytes, count: int, checked: bool) -> Replies:
        protocol = await self._connected()
        return await protocol.send(payload, count, checked)

    async def _connected(self) -> _Protocol:
        loop = asyncio.get_running_loop()
        wait = self._retry_at - loop.time()
        if wait > 0:
            raise StoreUnavailable(f"budget store: reconnecting in {wait * 1000:.0f} ms")
        try:
            async with asyncio.timeout(self.timeout_s):
                protocol = await self._connect()
        except (TimeoutError, OSError, StoreUnavailable) as exc:
            self._backoff = min(self._backoff * 2, _BACKOFF_MAX_S) if self._backoff else _BACKOFF_FIRST_S
            self._retry_at = loop.time() + self._backoff
            if isinstance(exc, TimeoutError):
                raise StoreUnavailable(f"budget store: no connection within {self.timeout_s * 1000:.0f} ms") from None
            raise StoreUnavailable(f"budget store: {exc}") from exc
        self._backoff = 0.0
        return protocol

    async def _open(self) -> _Protocol:
        loop = asyncio.get_running_loop()
        params = self._params
        if "path" in params:
            _, protocol = await loop.create_unix_connection(lambda: _Protocol(self.timeout_s), params["path"])
        else:
            host = params.get("host", "localhost")
            tls = _tls_context(params)
            _, protocol = await loop.create_connection(lambda: _Protocol(self.timeout_s), host,
                                                       params.get("port", 6379), ssl=tls,
                                                       server_hostname=host if tls is not None else None)
        setup: list[bytes] = []
        if params.get("password") is not None:
            user = params.get("username")
            setup.append(pack(b"AUTH", user, params["password"]) if user else pack(b"AUTH", params["password"]))
        if params.get("db"):
            setup.append(pack(b"SELECT", params["db"]))
        if setup:
            await protocol.send(b"".join(setup), len(setup))   # an error reply raises
        self._protocol = protocol
        return protocol

    async def close(self) -> None:
        protocol, self._protocol = self._protocol, None
        if protocol is not None and protocol.transport is not None:
            protocol.transport.close()


class RedisPyConnections:
    def __init__(self, url: str, timeout_s: float, max_idle: int = 64) -> None:
        self._factory = ConnectionPool.from_url(
            url, socket_timeout=None, socket_connect_timeout=timeout_s, retry=Retry(NoBackoff(), 0))
        self.timeout_s = timeout_s
        self._idle: list[AbstractConnection] = []
        self._max_idle = max_idle

    async def exchange(self, payload: bytes, count: int) -> Replies:
        conn = self._idle.pop() if self._idle else self._factory.make_connection()
        try:
            async with asyncio.timeout(self.timeout_s):
                if not conn.is_connected:
                    await conn.connect()
                await conn.send_packed_command(payload, check_health=False)
                replies = [await conn.read_response(disconnect_on_error=False) for _ in range(count)]
        except BaseException as exc:
            self._discard(conn)
            if isinstance(exc, NoScriptError):
                raise ScriptMissing(str(exc)) from None
            if isinstance(exc, (RedisError, OSError, TimeoutError, EOFError)):
                raise StoreUnavailable(f"budget store: {type(exc).__name__}: {exc}") from exc
            raise
        if len(self._idle) < self._max_idle:
            self._idle.append(conn)
        else:
            await conn.disconnect(nowait=True)
        return replies

    def _discard(self, conn: AbstractConnection) -> None:
        # A failure usually means the server went away: the idle connections go too.
        stale, self._idle = self._idle, []
        for c in (conn, *stale):
            asyncio.ensure_future(c.disconnect(nowait=True))

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.disconnect()
