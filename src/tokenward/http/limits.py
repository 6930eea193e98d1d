"""How long and how slowly a client may take to send a request, and how many connections
one client address may hold: the server's defences against clients that hold
connections without sending (slowloris on the head, a body trickled a byte at a time).

Defaults (``server:`` in the config; README, docs/benchmarks.md has the measurements):

* ``head_timeout_s``: a request head (request line and headers) must arrive whole within
  this long of its first byte (of the connection's start, for its first request); else
  408 ``request_timeout`` (or a plain close if not a byte came).
* ``body_timeout_s``: a request body must arrive whole within this long of its head, the
  time the server itself stopped reading (back-pressure) not counted.
* ``min_body_rate``: after ``body_rate_grace_s``, the body's average rate since its head
  must stay at or above this many bytes a second (0: no rate rule).
* ``max_connections_per_client``: connections one client address may hold at once (None:
  no cap); one past it is answered 503 ``too_many_connections``, as past
  ``server.max_connections``.

The old gap rule stays: a body with no byte for ``keep_alive_s`` gets 408 too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config.schema import Config


@dataclass(frozen=True, slots=True)
class ClientLimits:
    head_timeout_s: float = 10.0
    body_timeout_s: float = 60.0
    min_body_rate: int = 1024
    body_rate_grace_s: float = 5.0
    max_connections_per_client: int | None = None


def client_limits(config: Config) -> ClientLimits:
    """The limits a config's ``server`` section sets."""
    server = config.server
    return ClientLimits(server.head_timeout_s, server.body_timeout_s, server.min_body_rate,
                        server.body_rate_grace_s, server.max_connections_per_client)
