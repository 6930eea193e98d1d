"""What all connections of one HTTP server share, and the limit on a request head."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol

from ..writes import batch_for
from .limits import ClientLimits

if TYPE_CHECKING:
    from .asgi import ASGIApp

# httptools buffers a header line until it ends, without a limit of its own: a request
# head that keeps growing across reads is refused (431) at this many bytes, long before
# memory suffers. The finer limits (edge.max_header_bytes, edge.max_headers) are counted
# per header as the parser hands them over, so they hold however the bytes arrive, on
# every route (/healthz, /metrics and /admin/* included).
MAX_HEAD_BYTES = 65536
MAX_HEADER_BYTES = 16_384   # edge.max_header_bytes: the request line and headers, as counted
MAX_HEADERS = 64            # edge.max_headers

# An answer given while the request body is still arriving (413 on a declared length, a
# refusal before the body was read) is followed by a lingering close (RFC 9112 9.6): the
# response, then FIN, then the client's bytes are read and dropped until it closes, for
# at most LINGER_S and LINGER_BYTES, then the connection closes. Closing at once, with
# unread bytes in the socket, sends a reset that can destroy the answer before the
# client reads it.
LINGER_S = 2.0
LINGER_BYTES = 8 * 1024 * 1024


class Connection(Protocol):
    """What the server's sweep and shutdown use of a connection (server.py's ``HttpConnection``)."""

    transport: asyncio.Transport
    lingering: bool
    last_read: float           # loop time of the last bytes received
    head_since: float | None
    idle_since: float | None
    body_since: float | None
    body_bytes: int
    read_paused: bool

    def close(self) -> None: ...

    def close_when_idle(self) -> None: ...

    def time_out_head(self) -> None: ...

    def time_out_body(self, message: str) -> None: ...

    def waiting_for_body(self) -> bool: ...


class ServerState:
    """What all connections of one server share."""

    def __init__(self, app: ASGIApp, loop: asyncio.AbstractEventLoop, keep_alive_s: float,
                 max_head_bytes: int = MAX_HEAD_BYTES, max_connections: int | None = None,
                 max_header_bytes: int = MAX_HEADER_BYTES, max_headers: int = MAX_HEADERS,
                 limits: ClientLimits = ClientLimits()) -> None:
        self.app = app
        self.loop = loop
        self.keep_alive_s = keep_alive_s
        self.max_head_bytes = max_head_bytes
        self.max_header_bytes = max_header_bytes
        self.max_headers = max_headers
        self.max_connections = max_connections
        self.limits = limits
        self.turned_away = 0
        self.connections: set[Connection] = set()
        # Of ``connections``, those answered and only draining what the client still sends
        # (``HttpConnection.linger``, closed within LINGER_S): they count against neither cap.
        self.lingering = 0
        # client address -> its connections that count against max_connections_per_client
        self.per_client: dict[str, int] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.draining = False
        self.batch = batch_for(loop)

    def admits(self, host: str | None) -> bool:
        """Whether a new connection from ``host`` stays within both caps (then it is counted)."""
        cap = self.max_connections
        if cap is not None and len(self.connections) - self.lingering >= cap:
            return False
        per_client = self.limits.max_connections_per_client
        if per_client is not None and host is not None:
            held = self.per_client.get(host, 0)
            if held >= per_client:
                return False
            self.per_client[host] = held + 1
        return True

    def release_client(self, host: str) -> None:
        held = self.per_client.get(host, 0) - 1
        if held > 0:
            self.per_client[host] = held
        else:
            self.per_client.pop(host, None)

    def sweep_idle(self) -> None:
        """Close connections idle for longer than keep-alive; answer 408 to a request head
        or body that takes too long (``limits.py``) or whose body stopped arriving for as
        long as keep-alive."""
        now = self.loop.time()
        cutoff = now - self.keep_alive_s
        head_cutoff = now - self.limits.head_timeout_s
        for conn in list(self.connections):
            if conn.lingering:
                continue
            if conn.head_since is not None and conn.head_since < head_cutoff:
                conn.time_out_head()
            elif conn.idle_since is not None and conn.idle_since < cutoff:
                conn.close()
            elif conn.body_since is not None and not conn.read_paused:
                why = self._body_too_slow(conn, conn.body_since, now)
                if why is not None:
                    conn.time_out_body(why)
            elif conn.last_read < cutoff and conn.waiting_for_body():
                conn.time_out_body("the request body stopped arriving")

    def _body_too_slow(self, conn: Connection, since: float, now: float) -> str | None:
        limits = self.limits
        elapsed = now - since
        if elapsed > limits.body_timeout_s:
            return f"the request body did not arrive within {limits.body_timeout_s:g} s"
        if limits.min_body_rate and elapsed > limits.body_rate_grace_s and \
                conn.body_bytes < limits.min_body_rate * elapsed:
            return f"the request body arrived slower than {limits.min_body_rate} bytes a second"
        if now - conn.last_read > self.keep_alive_s:
            return "the request body stopped arriving"
        return None
