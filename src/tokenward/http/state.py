"""What all connections of one HTTP server share, and the limit on a request head."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Callable

from ..writes import batch_for

if TYPE_CHECKING:
    from .server import HttpConnection

# httptools buffers a header line until it ends, without a limit of its own: a request
# head that keeps growing is refused (431) at this many bytes, long before memory suffers.
# The edge stage's finer limits (edge.max_header_bytes) apply below it, with reason codes.
MAX_HEAD_BYTES = 65536


class ServerState:
    """What all connections of one server share."""

    def __init__(self, app: Callable, loop: asyncio.AbstractEventLoop, keep_alive_s: float,
                 max_head_bytes: int = MAX_HEAD_BYTES, max_connections: int | None = None) -> None:
        self.app = app
        self.loop = loop
        self.keep_alive_s = keep_alive_s
        self.max_head_bytes = max_head_bytes
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
