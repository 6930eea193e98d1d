"""The lean RESP client's protocol: what it does with replies it cannot match."""

from __future__ import annotations

import asyncio

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


async def test_the_lean_client_speaks_tls_and_auth(tmp_path):
    """``rediss://`` with a password goes through the same lean client (it used to fall back
    to redis-py's connections, silently a different client)."""
    import shutil
    import socket
    import subprocess
    import time

    from tests.fixtures.certs import issue, make_ca
    from tokenward.budget.redis import RedisStore
    from tokenward.budget.resp import RespClient, pack

    ca, ca_cert, ca_key = make_ca(tmp_path)
    server = issue(tmp_path, "redis", ca_cert, ca_key)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([shutil.which("redis-server") or "/usr/bin/redis-server", "--port", "0",
                             "--tls-port", str(port), "--tls-cert-file", str(server.cert),
                             "--tls-key-file", str(server.key), "--tls-ca-cert-file", str(ca.cert),
                             "--tls-auth-clients", "no", "--requirepass", "s3cret", "--save", "",
                             "--appendonly", "no", "--dir", str(tmp_path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"rediss://:s3cret@127.0.0.1:{port}/0?ssl_ca_certs={ca.cert}"
        store = RedisStore(url, 1.0)
        assert isinstance(store._transport, RespClient)
        deadline = time.monotonic() + 10
        while True:
            try:
                [reply] = await store._transport.exchange(pack(b"PING"), 1)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.05)
        assert reply == b"PONG"
        wrong = RedisStore(f"rediss://:nope@127.0.0.1:{port}/0?ssl_ca_certs={ca.cert}", 1.0)
        with pytest.raises(Exception):
            await wrong._transport.exchange(pack(b"PING"), 1)
        await wrong.close()
        await store.close()
    finally:
        proc.kill()
        proc.wait()
