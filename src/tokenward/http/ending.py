"""How a connection of the gateway's server ends early (server.py's ``HttpConnection``
takes these methods): a refusal of bytes that cannot be framed, a request head or body
that takes too long (http/limits.py), and the lingering close after an answer the client
may still be uploading past, during which the connection counts against no cap."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol

from ..errors import Reason
from .refusals import error_response

if TYPE_CHECKING:
    from .cycle import RequestCycle
    from .state import ServerState


class _Connection(Protocol):
    """What these methods use of the connection (server.py's ``HttpConnection`` has it all):
    the mixin's methods take it as their ``self`` type, so mypy checks both sides."""

    state: ServerState
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    cycle: RequestCycle | None
    parsing: RequestCycle | None
    queue: list[RequestCycle]
    in_head: bool
    refused: bool
    lingering: bool
    linger_left: int
    linger_timer: asyncio.TimerHandle | None
    read_paused: bool
    head_since: float | None
    body_since: float | None
    host: str | None

    def write(self, data: bytes) -> None: ...
    def close(self) -> None: ...
    def pause_reading(self) -> None: ...
    def linger(self) -> None: ...
    def _uncount_client(self: _Connection) -> None: ...
    def _reject(self: _Connection, reason: Reason | None, message: str) -> None: ...


class EarlyEnds:
    __slots__ = ()   # the connection's own __slots__ hold these, which its methods set:
    refused: bool
    lingering: bool
    in_head: bool
    read_paused: bool
    linger_left: int
    linger_timer: asyncio.TimerHandle | None
    parsing: RequestCycle | None
    head_since: float | None
    body_since: float | None
    host: str | None

    def linger(self: _Connection) -> None:
        """Close gracefully after an answer the client may still be uploading past (RFC 9112
        section 9.6): FIN after the response, then read and drop what still comes, until
        the client closes, LINGER_BYTES arrive or LINGER_S pass; then close."""
        from .state import LINGER_BYTES, LINGER_S

        if self.lingering:
            return
        self.parsing = self.body_since = self.head_since = None
        self.refused = self.lingering = True
        state = self.state
        state.lingering += 1
        self._uncount_client()
        if state.max_connections is not None and state.lingering > state.max_connections:
            self.close()   # as many draining as may be open: no more descriptors for them
            return
        self.linger_left = LINGER_BYTES
        self.state.batch.half_close(self.transport)
        self.linger_timer = self.loop.call_later(LINGER_S, self.transport.close)
        if self.read_paused:
            self.read_paused = False
            self.transport.resume_reading()

    def _uncount_client(self: _Connection) -> None:
        if self.host is not None:
            self.state.release_client(self.host)
            self.host = None

    def waiting_for_body(self: _Connection) -> bool:
        cycle = self.cycle
        return cycle is not None and cycle.waiter is not None and cycle.more_body and not cycle.body_returned

    def time_out_head(self: _Connection) -> None:
        """A request head not whole within ``head_timeout_s``: 408 if a byte of it came,
        else (a connection that never said anything) a plain close."""
        if self.in_head:
            self.in_head = False
            self._reject(Reason.request_timeout,
                         f"the request head did not arrive within {self.state.limits.head_timeout_s:g} s")
        elif self.cycle is None and not self.queue:
            self.close()
        else:
            self.head_since = None  # answering: the idle clock starts after the answer

    def time_out_body(self: _Connection, message: str) -> None:
        """A request body too slow or stopped (``ServerState.sweep_idle``): 408, and the app,
        wherever it is in the request, sees the client gone."""
        self._reject(Reason.request_timeout, message)

    def _reject(self: _Connection, reason: Reason | None, message: str) -> None:
        # Nothing more of this connection is parsed (the parser's state is gone); what the
        # client still sends is read and dropped while the answer lingers (``linger``).
        # reason None (an HTTP/0.9 request): no answer it could read, the connection closes.
        self.refused = True
        self.body_since = self.head_since = None
        cycle, parsing = self.cycle, self.parsing
        if parsing is not None and parsing is not cycle and parsing in self.queue:
            self.queue.remove(parsing)  # a pipelined request whose body never arrived whole
        self.parsing = None
        if cycle is not None and cycle is parsing and not cycle.complete:
            if not cycle.started:
                # Its body is malformed (a chunk size that overflows, say): the client gets the
                # reason, and the app, wherever it is in the request, sees the client gone, so
                # its own answer (it may be about to send one) has nowhere to go.
                cycle.started = True
                if reason is not None:   # None (HTTP/0.9) is refused before its cycle exists
                    self.write(error_response(reason, message))
                cycle.lost()
            self.linger()
            return
        pending = [c for c in (cycle, *self.queue) if c is not None and not c.complete]
        if pending:
            # Requests read whole before the bytes that could not be framed are answered
            # first, the last of them with the connection's close; those bytes are not.
            pending[-1].keep_alive = False
            if not self.transport.is_closing():
                self.pause_reading()
        elif reason is None:
            self.close()
        else:
            self.write(error_response(reason, message))
            self.linger()
