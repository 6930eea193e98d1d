"""The gateway's HTTP/1.1 server: httptools parsing under an asyncio protocol, speaking ASGI.

Why not uvicorn: its request cycle was a quarter of the gateway's CPU per request (two
``write`` calls per response, a regex per response header, an ``asyncio.Event`` and a
keep-alive timer per request). This server keeps the ASGI interface, so the gateway and
its admin API run unchanged under any ASGI server, but does the least per request:

* one task per connection answers its requests in turn, not a task per request;
* a response whose body arrives in one ``send`` goes out in one ``write``, head and body
  (``cycle.py``), and writes are batched per event-loop pass (``writes.py``);
* a fully received body is handed to ``receive()`` without a wait;
* idle keep-alive connections (and clients that never finish their request head) are
  closed by one sweep a second over the open connections, not a timer per request;
* a client that goes away is reported by calling ``cycle.on_disconnect`` (set by the
  request, see ``disconnect.py``), so noticing it costs no task per request.

Pipelined requests are queued and answered in order; the request body is buffered only up
to ``HIGH_WATER`` bytes before reading pauses, so a large upload waits for ``receive()``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import NoReturn

import httptools

from ..errors import Reason
from .cycle import RequestCycle, wake
from .ending import EarlyEnds
from .head import HOST, ONCE, SPECIAL, check_transfer_encoding, check_version, split_target
from .refusals import Refused, error_response
from .state import ServerState

log = logging.getLogger("tokenward.http")

HIGH_WATER = 65536
_ASGI = {"version": "3.0", "spec_version": "2.3"}


class HttpConnection(EarlyEnds, asyncio.Protocol):
    __slots__ = ("state", "loop", "transport", "parser", "cycle", "parsing", "queue", "url", "headers", "expect",
                 "buffered", "read_paused", "write_paused", "drain_waiter", "idle_since", "client", "server",
                 "scheme", "worker", "busy", "next_waiter", "in_head", "head_bytes", "refused", "last_read",
                 "header_bytes", "lingering", "linger_left", "linger_timer", "head_since", "body_since",
                 "body_bytes", "paused_since", "host", "seen", "head_refusal")

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self.loop = state.loop
        self.transport: asyncio.Transport   # set by connection_made, before any other call
        self.parser = httptools.HttpRequestParser(self)
        self.cycle: RequestCycle | None = None  # the cycle being answered
        self.parsing: RequestCycle | None = None  # the cycle whose request is being read
        # pipelined requests behind ``cycle``: a list, not a deque, because it is nearly always
        # empty and an empty deque costs 600 bytes on every open connection (a list 56)
        self.queue: list[RequestCycle] = []
        # One task per connection answers its requests in turn (cheaper than a task per request).
        self.worker: asyncio.Task[None] | None = None
        self.busy = False  # the worker is inside the app (which may outlive its response)
        self.next_waiter: asyncio.Future[None] | None = None
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.expect = False
        self.in_head = False
        self.head_bytes = 0  # bytes of reads that ended inside the current request head
        self.header_bytes = 0  # the current head as parsed: target + headers (edge.max_header_bytes)
        self.refused = False  # answered 400/431: nothing more is read
        # The refusal a head callback raised, for data_received: httptools reports it as a
        # callback error whose __context__ is whatever exception was being handled when it
        # raised, which is not always the callback's (compiled code, tokenward/compiled.py)
        self.head_refusal: Refused | None = None
        self.lingering = False  # answered early: reading and dropping the rest, then closing
        self.linger_left = 0
        self.linger_timer: asyncio.TimerHandle | None = None
        self.last_read = 0.0  # loop time of the last bytes received
        # The slow-client clocks (limits.py, swept by ServerState.sweep_idle): when the
        # request head being read began, and when the body being read began (shifted on by
        # the time reading was paused) with its bytes so far; None when not reading one.
        self.head_since: float | None = None
        self.body_since: float | None = None
        self.body_bytes = 0
        self.paused_since = 0.0
        self.host: str | None = None  # counted against max_connections_per_client while set
        self.seen = 0  # header names of the current head that may come only once (head.py)
        self.buffered = 0
        self.read_paused = False
        self.write_paused = False
        self.drain_waiter: asyncio.Future[None] | None = None
        self.idle_since: float | None = None
        self.client: tuple[str, int] | None = None   # ASGI's (host, port), of each end
        self.server: tuple[str, int] | None = None
        self.scheme = "http"

    # -- asyncio.Protocol ------------------------------------------------------------------
    # typeshed's base takes any BaseTransport; a stream connection is handed a Transport
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.transport = transport
        state = self.state
        peer = transport.get_extra_info("peername")
        host = peer[0] if isinstance(peer, tuple) else None
        if not state.admits(host):
            # Answered at once, not parsed: its descriptor is back within this loop pass.
            state.turned_away += 1
            self.refused = True
            transport.write(error_response(Reason.too_many_connections,
                                            "this gateway holds all the connections it may; retry shortly",
                                            b"retry-after: 1\r\n"))
            transport.close()
            return
        state.connections.add(self)
        if state.limits.max_connections_per_client is not None:
            self.host = host
        self.idle_since = self.last_read = self.head_since = self.loop.time()
        sock = transport.get_extra_info("sockname")
        self.client = tuple(peer[:2]) if isinstance(peer, tuple) else None
        self.server = tuple(sock[:2]) if isinstance(sock, tuple) else None
        if transport.get_extra_info("sslcontext") is not None:
            self.scheme = "https"

    def connection_lost(self, exc: Exception | None) -> None:
        state = self.state
        if self in state.connections:
            state.connections.discard(self)
            if self.lingering:
                state.lingering -= 1
            self._uncount_client()
        if self.linger_timer is not None:
            self.linger_timer.cancel()
            self.linger_timer = None
        self.idle_since = None
        for cycle in (self.cycle, self.parsing, *self.queue):
            if cycle is not None and not cycle.disconnected:
                cycle.lost()
        self.queue.clear()
        self._wake_drain()
        self._wake_worker()

    def write(self, data: bytes) -> None:
        self.state.batch.write(self.transport, data)

    def close(self) -> None:
        self.state.batch.close(self.transport)

    def data_received(self, data: bytes) -> None:
        if self.refused:
            if self.lingering:
                self.linger_left -= len(data)
                if self.linger_left <= 0:
                    self.transport.close()
            return
        self.last_read = self.loop.time()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # No protocol upgrades here (websocket, h2c): answer in HTTP/1.1 and close after.
            cycle = self.parsing or self.cycle
            if cycle is not None:
                cycle.keep_alive = False
        except httptools.HttpParserError as exc:
            refused, self.head_refusal = self.head_refusal, None
            if refused is not None:
                self._reject(refused.reason, refused.message)
            else:
                self._reject(Reason.malformed_request, f"invalid HTTP request: {str(exc)[:200]}")
            return
        if self.in_head:
            self.head_bytes += len(data)
            if self.head_bytes > self.state.max_head_bytes:
                self.in_head = False
                self._reject(Reason.headers_too_large, "request header fields too large")

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        self._wake_drain()

    # -- httptools callbacks ----------------------------------------------------------------
    def on_message_begin(self) -> None:
        # idle_since stays set until the head is complete: a client that never finishes
        # its request head is closed like an idle one.
        self.url = b""
        self.headers = []
        self.expect = False
        self.in_head = True
        self.head_bytes = 0
        self.header_bytes = 0
        self.seen = 0
        if self.head_since is None:
            self.head_since = self.last_read   # parsing runs inside data_received: now

    def _refuse(self, refused: Refused) -> NoReturn:
        """Stop parsing this head with ``refused`` (data_received answers it)."""
        self.head_refusal = refused
        raise refused

    def on_url(self, url: bytes) -> None:
        self.url += url
        self.header_bytes += len(url)
        if self.header_bytes > self.state.max_header_bytes:
            self._refuse(Refused(Reason.headers_too_large, "request header fields too large"))

    def on_header(self, name: bytes, value: bytes) -> None:
        # Counted as the edge stage counts them, per header as httptools hands it over: the
        # limits hold whether the head came in one read or many, whatever the route.
        self.header_bytes += len(name) + len(value) + 4
        if self.header_bytes > self.state.max_header_bytes:
            self._refuse(Refused(Reason.headers_too_large, f"request headers exceed {self.state.max_header_bytes} bytes"))
        if len(self.headers) >= self.state.max_headers:
            self._refuse(Refused(Reason.headers_too_large, f"more than {self.state.max_headers} request headers"))
        name = name.lower()
        if name in SPECIAL:   # one lookup for the usual header, not a test per rule
            if name == b"expect":
                if value.lower() == b"100-continue":
                    self.expect = True
            elif name == b"transfer-encoding":
                try:
                    check_transfer_encoding(value, self.parser.get_http_version())
                except Refused as refused:
                    self._refuse(refused)
            else:
                bit = ONCE[name]
                if self.seen & bit:
                    self._refuse(Refused(Reason.malformed_request, f"more than one {name.decode('latin-1')} header"))
                self.seen |= bit
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.in_head = False
        parser = self.parser
        version = parser.get_http_version()
        if version != "1.1" or not self.seen & HOST:
            try:
                check_version(version, self.seen)
            except Refused as refused:
                self._refuse(refused)
        path, raw_path, query = split_target(self.url)
        scope = {
            "type": "http", "asgi": _ASGI, "http_version": version, "method": parser.get_method().decode("ascii"),
            "scheme": self.scheme, "path": path, "raw_path": raw_path, "query_string": query,
            "root_path": "", "headers": self.headers, "client": self.client, "server": self.server,
        }
        self.idle_since = self.head_since = None
        self.body_since, self.body_bytes = self.last_read, 0
        keep_alive = parser.should_keep_alive() and not self.state.draining
        cycle = RequestCycle(self, scope, keep_alive, self.expect)
        self.parsing = cycle
        if self.cycle is None and not self.busy:
            self.cycle = cycle
            if self.worker is None:
                self.worker = self.loop.create_task(self._serve())
                self.state.tasks.add(self.worker)
            else:
                self._wake_worker()
        else:
            self.queue.append(cycle)

    def on_body(self, body: bytes) -> None:
        cycle = self.parsing
        if cycle is None or cycle.complete:
            return
        cycle.body.append(body)
        self.body_bytes += len(body)
        self.buffered += len(body)
        if self.buffered > HIGH_WATER:
            self.pause_reading()
        cycle._wake()

    def on_message_complete(self) -> None:
        cycle = self.parsing
        self.parsing = self.body_since = None
        if cycle is not None:
            cycle.more_body = False
            cycle._wake()
        if self.queue and self.cycle is not None:
            self.pause_reading()  # one pipelined request waiting is enough

    # -- request lifecycle -----------------------------------------------------------------
    async def _serve(self) -> None:
        try:
            while True:
                cycle = self.cycle
                if cycle is None:
                    if self.queue:
                        cycle = self.cycle = self.queue.pop(0)
                        self.resume_reading()
                    elif self.transport.is_closing():
                        return
                    else:
                        self.next_waiter = self.loop.create_future()
                        await self.next_waiter
                        continue
                self.busy = True
                # The app is awaited here rather than in a helper: every await below it
                # passes through one coroutine frame less each time it suspends and resumes.
                try:
                    await self.state.app(cycle.scope, cycle.receive, cycle.send)
                except BaseException as exc:  # noqa: BLE001 - the server must outlive any app failure
                    if not isinstance(exc, (asyncio.CancelledError, Exception)):
                        raise
                    self._app_failed(cycle, exc)
                else:
                    if not cycle.complete and not cycle.disconnected:
                        log.error("the application returned without completing its response")
                        self._abandon(cycle, Reason.internal_error, "internal error")
                finally:
                    self.busy = False
                if self.cycle is cycle:  # ended without completing its response
                    self.cycle = None
        finally:
            self.worker = None
            self.state.tasks.discard(asyncio.current_task())

    def _wake_worker(self) -> None:
        waiter, self.next_waiter = self.next_waiter, None
        wake(waiter)

    def _app_failed(self, cycle: RequestCycle, exc: BaseException) -> None:
        if isinstance(exc, asyncio.CancelledError):
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                task.uncancel()  # the request was cancelled, not the connection's worker
            if not cycle.disconnected:  # cut off by a shutdown past its grace period
                self._abandon(cycle, Reason.shutting_down, "the server is shutting down")
            return
        if not cycle.disconnected:
            log.error("unhandled error in the application", exc_info=exc)
            self._abandon(cycle, Reason.internal_error, "internal error")

    def _abandon(self, cycle: RequestCycle, reason: Reason, message: str) -> None:
        # The head is written with the first body bytes: until then a 500 can still replace it.
        if (not cycle.started or cycle.head is not None) and not self.transport.is_closing():
            self.write(error_response(reason, message))
        cycle.complete = True
        self.close()

    def response_done(self, cycle: RequestCycle) -> None:
        if cycle is not self.cycle:
            return
        self.cycle = None
        if cycle.body:  # a body the app never read (it answered without it)
            self.buffered -= sum(len(part) for part in cycle.body)
            cycle.body = []
        if self.transport.is_closing():
            return
        if cycle is self.parsing or (self.refused and not cycle.keep_alive):
            # Answered before its body was all read (a refusal), or the last answer before
            # bytes that could not be framed: the rest is not worth parsing, and the
            # connection's framing cannot be trusted after skipping it. The client may still
            # be sending: close gracefully.
            self.linger()
            return
        if not cycle.keep_alive:
            self.close()
            return
        if not self.queue:
            self.idle_since = self.loop.time()
        self.resume_reading()

    # -- flow control ----------------------------------------------------------------------
    def body_drained(self, size: int) -> None:
        self.buffered -= size
        if self.buffered <= HIGH_WATER and self.cycle is not None:
            self.resume_reading()

    def pause_reading(self) -> None:
        if not self.read_paused:
            self.read_paused = True
            self.paused_since = self.loop.time()
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.read_paused and not self.queue and not self.refused:
            self.read_paused = False
            if self.body_since is not None:  # the time we did not read is not the client's
                self.body_since += self.loop.time() - self.paused_since
            self.transport.resume_reading()

    async def drain(self) -> None:
        if self.drain_waiter is None:
            self.drain_waiter = self.loop.create_future()
        await asyncio.shield(self.drain_waiter)

    def _wake_drain(self) -> None:
        waiter, self.drain_waiter = self.drain_waiter, None
        wake(waiter)

    # -- shutdown --------------------------------------------------------------------------
    def close_when_idle(self) -> None:
        """Graceful shutdown: close now if idle, else after the current response."""
        if self.cycle is None:
            self.close()
        else:
            self.cycle.keep_alive = False
            for queued in self.queue:
                queued.keep_alive = False
