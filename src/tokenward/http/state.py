"""What all connections of one HTTP server share, and the limit on a request head."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Callable

from ..writes import batch_for

if TYPE_CHECKING:
    from .server import HttpConnection

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


class ServerState:
    """What all connections of one server share."""

    def __init__(self, app: Callable, loop: asyncio.AbstractEventLoop, keep_alive_s: float,
                 max_head_bytes: int = MAX_HEAD_BYTES, max_connections: int | None = None,
                 max_header_bytes: int = MAX_HEADER_BYTES, max_headers: int = MAX_HEADERS) -> None:
        self.app = app
        self.loop = loop
        self.keep_alive_s = keep_alive_s
        self.max_head_bytes = max_head_bytes
        self.max_header_bytes = max_header_bytes
        self.max_headers = max_headers
        self.max_connections = max_connections
        self.turned_away = 0
        self.connections: set[HttpConnection] = set()
        self.tasks: set[asyncio.Task] = set()
        self.draining = False
        self.batch = batch_for(loop)

    def sweep_idle(self) -> None:
        """Close connections idle (or stuck in a request head) for longer than keep-alive,
        and answer 408 to requests whose body stopped arriving for as long."""
        cutoff = self.loop.time() - self.keep_alive_s
        for conn in list(self.connections):
            if conn.idle_since is not None and conn.idle_since < cutoff:
                conn.close()
            elif conn.last_read < cutoff and conn.waiting_for_body():
                conn.time_out_body()
