"""Socket writes deferred to the end of the event-loop pass, then issued back to back.

Why: on a VM, waking a process that sleeps on another CPU costs an inter-processor
interrupt, and loopback ``send()`` pays for it in the sender: 35-40 µs of CPU per
cross-CPU ping-pong on the benchmark machine against 10 µs on one CPU
(``bench/pingpong.py``). Written as each request finishes, 30 responses spread over one
loop pass wake their reader up to 30 times; written together, the first write wakes it and
the rest land while it runs. The cost is one ``call_soon`` per loop pass and a list
append per write; the delay is the rest of the current pass (microseconds).

Every write and close of a transport that uses the batch must go through it, so their
order is kept. ``abort()`` may still be called directly: it drops unwritten data anyway.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import weakref
from typing import Final, Literal

log = logging.getLogger("tokenward.writes")


class _Mark(enum.Enum):
    EOF = "eof"   # half-close marker


_CLOSE: Final = None
_EOF: Final = _Mark.EOF

# Past this many queued bytes the batch is written at once: a sender that never yields
# must still meet the transports' flow control (pause_writing) rather than queue here.
FLUSH_BYTES = 262_144


class WriteBatch:
    __slots__ = ("_loop", "_pending", "_scheduled", "_bytes", "__weakref__")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._pending: list[tuple[asyncio.WriteTransport,
                                  bytes | tuple[bytes, bytes] | None | Literal[_Mark.EOF]]] = []
        self._scheduled = False
        self._bytes = 0

    def write(self, transport: asyncio.WriteTransport, data: bytes) -> None:
        self._pending.append((transport, data))
        self._bytes += len(data)
        if self._bytes > FLUSH_BYTES:
            self.flush()
        elif not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self.flush)

    def write_parts(self, transport: asyncio.WriteTransport, head: bytes, body: bytes) -> None:
        """``head`` then ``body``, handed over in one ``writelines``: one ``writev`` on
        uvloop, where two ``write`` calls cost two syscalls (and a small segment of their own
        for the head); joining them would copy the body. For the upstream client's large
        bodies (upstream/client.py), a ~68 KB agent request: 5 syscalls a request -> 4."""
        self._pending.append((transport, (head, body)))
        self._bytes += len(head) + len(body)
        if self._bytes > FLUSH_BYTES:
            self.flush()
        elif not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self.flush)

    def close(self, transport: asyncio.WriteTransport) -> None:
        """Close once the writes queued before it are handed to the transport."""
        self._pending.append((transport, _CLOSE))
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self.flush)

    def half_close(self, transport: asyncio.WriteTransport) -> None:
        """Send FIN (``write_eof``) once the writes queued before it are handed over; the
        transport keeps reading. A transport that cannot (TLS) is left as it is."""
        self._pending.append((transport, _EOF))
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self.flush)

    def flush(self) -> None:
        pending = self._pending
        self._pending = []
        self._bytes = 0
        self._scheduled = False  # a flush already scheduled just finds less to do
        for transport, data in pending:
            if transport.is_closing():
                continue
            try:
                if data is _CLOSE:
                    transport.close()
                elif data is _EOF:
                    if transport.can_write_eof():
                        transport.write_eof()
                elif isinstance(data, tuple):
                    transport.writelines(data)
                else:
                    transport.write(data)
            except Exception:  # one broken transport must not cost the others their writes
                log.exception("write to a transport failed")
                transport.abort()


_batches: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, WriteBatch] = weakref.WeakKeyDictionary()


def batch_for(loop: asyncio.AbstractEventLoop) -> WriteBatch:
    """The one batch of this loop, shared by the server and the upstream client."""
    batch = _batches.get(loop)
    if batch is None:
        batch = _batches[loop] = WriteBatch(loop)
    return batch
