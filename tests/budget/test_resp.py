"""The lean RESP client's protocol: what it does with replies it cannot match."""

from __future__ import annotations

import pytest

from tokenward.budget.resp import _Protocol
from tokenward.budget.store import StoreUnavailable


class _Transport:
    def __init__(self) -> None:
        self.aborted = False

    def abort(self) -> None:
        self.aborted = True

    def write(self, data: bytes) -> None:
        pass


async def test_a_reply_nobody_asked_for_drops_the_connection_cleanly():
    protocol = _Protocol(timeout_s=1.0)
    transport = _Transport()
    protocol.connection_made(transport)
    waiting = protocol.send(b"*1\r\n$4\r\nPING\r\n", 1)
    protocol.data_received(b"+PONG\r\n")                          # the control: matched and answered
    assert await waiting == [b"PONG"]
    protocol.data_received(b"+OK\r\n")                            # nothing is waiting for this one
    assert transport.aborted and isinstance(protocol.lost, ConnectionError)
    late = protocol.send(b"*1\r\n$4\r\nPING\r\n", 1)              # a caller after the drop is not left hanging
    protocol.connection_lost(None)
    with pytest.raises(StoreUnavailable):
        await late
