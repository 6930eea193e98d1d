"""A Redis that stops answering for 200 ms under load (SIGSTOP, then SIGCONT), as a fork for
BGSAVE or a stalled VM does. The outcome docs/budget.md promises:

- calls in flight fail at their own deadline (store.timeout_ms), each alone: their
  requests are refused 503 ``budget_store_unavailable`` (the tier fails closed) within
  about that time, never after the whole pause;
- the connection survives the pause (no reconnect storm), and once Redis answers again
  requests are admitted within the breaker's ceiling (250 ms; budget/guard.py);
- nothing is charged twice or lost: a reservation whose answer was lost is voided once the
  store is back, so the tenant's budget afterwards is exactly the budget less what the
  admitted requests used, and no reservation record is left.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import tempfile
import time

import httpx
import pytest

from tests.fixtures.redis_server import RedisServer
from tokenward.budget.limits import tenant_namespace
from tokenward.budget.policy import SCALE

from .conftest import FakeClock
from .gateway_helpers import backend, budget_config, chat, in_process

TPM = 50_000_000
NS = tenant_namespace("tw", "acme")


@pytest.fixture
def paused_redis():
    server = RedisServer(tempfile.mkdtemp(prefix="tw-pause-"))
    server.start()
    yield server
    os.kill(server.proc.pid, signal.SIGCONT)
    server.stop()


async def test_a_200_ms_pause_fails_calls_alone_and_loses_nothing(tmp_path, paused_redis):
    """Every run must keep the budget exact and refuse only as it should. The timing bound
    (0.15 s plus the loop's measured hold-up) says something only while the hold-up is
    small: at 50 ms or more it would let a call that waited out the whole 200 ms pause
    pass. So a run on a host that held the loop that long is run again, up to three times,
    and the test fails if none was quiet enough to time."""
    lags = []
    for attempt in range(3):
        run_dir = tmp_path / f"run{attempt}"
        run_dir.mkdir()
        flush(paused_redis)
        lags.append(await _pause_under_load(run_dir, paused_redis))
        if lags[-1] < 0.05:
            return
    raise AssertionError(f"the event loop was held up {[round(lag, 3) for lag in lags]} s in three runs: "
                         "too busy a host to time the pause")


async def _pause_under_load(tmp_path, paused_redis) -> float:
    """One run; asserts everything but how long the host held the loop, and returns that."""
    async with backend() as mock:
        config = budget_config(tmp_path, mock.port, paused_redis.url, tpm=TPM, max_output=20,
                               store={"timeout_ms": 50})   # the default: well under the pause
        async with in_process(config, clock=FakeClock()) as gw:
            key = await gw.new_key()
            async with httpx.AsyncClient(base_url=gw.url, timeout=10) as http:   # warm: key cache, scripts
                for _ in range(5):
                    assert (await http.post("/v1/chat/completions", json=chat(max_tokens=20), headers=key)).is_success
            results: list[tuple[float, float, int, str | None]] = []
            # The clients exist before the clock starts: making one loads the CA bundle in
            # this event loop (~30 ms on a slow host), and 16 of them would hold the gateway
            # up for half a second, their first requests counted as refusals that came late.
            https = [httpx.AsyncClient(base_url=gw.url, timeout=10) for _ in range(16)]
            stop_at = time.monotonic() + 1.6

            async def client(http: httpx.AsyncClient) -> None:
                async with http:
                    while time.monotonic() < stop_at:
                        sent = time.monotonic()
                        resp = await http.post("/v1/chat/completions", json=chat(max_tokens=20), headers=key)
                        code = resp.json()["error"]["code"] if resp.status_code != 200 else None
                        results.append((sent, time.monotonic(), resp.status_code, code))

            async def pause() -> tuple[float, float]:
                await asyncio.sleep(0.5)
                os.kill(paused_redis.proc.pid, signal.SIGSTOP)
                stopped = time.monotonic()
                await asyncio.sleep(0.2)
                os.kill(paused_redis.proc.pid, signal.SIGCONT)
                return stopped, time.monotonic()

            lag = [0.0]   # the most the loop ran late on a 5 ms sleep: what the host took from it

            async def watch_lag() -> None:
                while time.monotonic() < stop_at:
                    before = time.monotonic()
                    await asyncio.sleep(0.005)
                    lag[0] = max(lag[0], time.monotonic() - before - 0.005)

            # As `tokenward serve` does after start-up (app.py): the heap so far is frozen, so
            # no full collection walks it mid-run. This process's heap is the whole test
            # session's, and one full collection of it held the loop for 115-150 ms.
            gc.collect()
            gc.freeze()
            try:
                connections_before = total_connections(paused_redis)
                clients = [asyncio.ensure_future(client(http)) for http in https]
                watcher = asyncio.ensure_future(watch_lag())
                stopped, resumed = await pause()
                await asyncio.gather(*clients, watcher)
            finally:
                gc.unfreeze()
            reconnects = total_connections(paused_redis) - connections_before - 1   # less our first INFO
            await wait_settled(gw)
            records = await gw.wait_decisions(len(results) + 5)
            left = await gw.store.value(NS + ":b:tokens")
            leases = await gw.store.open_reservations(NS + ":leases")

    statuses = {(status, code) for *_, status, code in results}
    assert statuses <= {(200, None), (503, "budget_store_unavailable")}, statuses
    refused = [r for r in results if r[2] == 503]
    admitted = [r for r in results if r[2] == 200]
    assert refused, "the pause refused nothing: it did not happen under load"
    # each refusal came within about the store timeout (50 ms), not after the whole pause:
    # 0.15 s, plus the longest the event loop (gateway and clients share it) was held up,
    # so a host that stalls the test for 100 ms does not pass for a call that waited
    bound = 0.15 + lag[0]
    late = [(round(sent - stopped, 3), round(done - sent, 3)) for sent, done, _, _ in refused if done - sent >= bound]
    assert not late, (late, round(lag[0], 3))
    # after SIGCONT, admitted again within the breaker's ceiling (250 ms), and no refusal after
    assert any(resumed < sent < resumed + 0.3 for sent, _, status, _ in admitted)
    assert all(sent < resumed + 0.3 for sent, _, status, _ in refused), "refusals long after the pause"
    # nothing charged twice, nothing lost: the budget is down by exactly what admitted work used
    used = sum(r["notes"]["budget"]["actual"] for r in records if r["status"] == 200)   # warm-up included
    assert left is not None and TPM - left[0] // SCALE == used
    assert leases == 0
    assert reconnects == 0      # the connection rode out the pause
    return lag[0]


def flush(server: RedisServer) -> None:
    """An empty Redis for the next run (its budget counted from the full amount again)."""
    import socket

    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(server.socket_path)
        sock.sendall(b"FLUSHALL\r\n")
        assert sock.recv(64) == b"+OK\r\n"


def total_connections(server: RedisServer) -> int:
    import socket

    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(server.socket_path)
        sock.sendall(b"INFO stats\r\n")
        data = b""
        while b"total_connections_received" not in data or not data.endswith(b"\r\n"):
            data += sock.recv(65536)
    line = next(l for l in data.split(b"\r\n") if l.startswith(b"total_connections_received:"))
    return int(line.split(b":")[1]) - 1   # this connection itself


async def wait_settled(gw, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while gw.admitter.settling:
        if time.monotonic() > deadline:
            raise AssertionError("settles or voids still pending")
        await asyncio.sleep(0.05)
