"""A pool's targets failing: a killed backend process (its requests that had not started
answering go to another target, charged once; it is ejected, then readmitted when it comes
back), a stalled one (accepts, never answers: ejected by its timeouts, which are not retried
unless the upstream says so), a refused connection, a 503, and /readyz (docs/upstreams.md,
"Failover" and "Health")."""

from __future__ import annotations

import asyncio
import socket
import pytest

from tests.fixtures.mock_processes import MockProcess, start_mocks
from tests.http.helpers import read_request
from tests.support import chat
from tests.upstream.pool_helpers import (
    URL, charged_tokens, eventually, pool_gateway, records_by_id, served_by, target_gauges, usage_total,
)

pytestmark = pytest.mark.timeout(90)

UP = "tokenward_upstream_target_up"


@pytest.fixture(scope="module")
def live():
    proc = MockProcess()
    yield proc
    proc.stop()


@pytest.fixture
def three():
    procs = start_mocks(3)
    yield procs
    for proc in procs:
        proc.stop()


def dead_url() -> str:
    """An address where nothing listens: connections are refused."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}/v1"


async def test_a_killed_target_is_ejected_its_requests_retried_elsewhere_charged_once_then_readmitted(three, tmp_path):
    a, b, c = three
    upstream = ", health_interval_s: 0.2, health_timeout_s: 0.5, eject_after: 2, eject_base_s: 30"
    async with pool_gateway([m.url for m in three], tmp_path, upstream) as gw, gw.client(timeout=20) as client:
        charged = charged_tokens(gw)
        slow = {"x-mock-delay-ms": "1500"}          # in flight without a byte of an answer yet
        inflight = [asyncio.ensure_future(client.post(gw.url + URL, json=chat(max_tokens=8), headers=slow))
                    for _ in range(6)]
        await eventually(lambda: [m.stats()["active_streams"] for m in three] == [2, 2, 2])
        a.kill()
        answers = await asyncio.gather(*inflight)
        assert [r.status_code for r in answers] == [200] * 6
        records = records_by_id(gw)
        tried = [records[r.headers["x-request-id"]]["notes"]["targets"] for r in answers]
        retried = [t for t in tried if len(t) == 2]
        assert len(retried) == 2 and all(t[0] == a.label and t[1] != a.label for t in retried)
        assert all(len(t) == 1 and t[0] != a.label for t in tried if len(t) == 1)
        for r in answers:
            record = records[r.headers["x-request-id"]]
            assert record["notes"]["budget"]["actual"] == usage_total(r.json())
            if len(record["notes"]["targets"]) == 2:
                assert record["notes"]["failover"][0]["target"] == a.label
        # one charge each, on what the answering target reported
        assert charged_tokens(gw) - charged == sum(usage_total(r.json()) for r in answers)

        await eventually(lambda: _gauge(gw, a.label, 0))
        after = [await client.post(gw.url + URL, json=chat(max_tokens=8)) for _ in range(4)]
        assert all(r.status_code == 200 for r in after)
        records = records_by_id(gw)
        assert a.label not in {served_by(records[r.headers["x-request-id"]]) for r in after}

        a.restart()                                  # back on the same port: a probe readmits it
        await eventually(lambda: _gauge(gw, a.label, 1))
        before = a.work()
        for _ in range(6):
            assert (await client.post(gw.url + URL, json=chat(max_tokens=8))).status_code == 200
        assert a.work() - before >= 1                 # in its turn again


async def _gauge(gw, target: str, value: int) -> bool:
    return (await target_gauges(gw)).get((UP, target)) == value


async def test_a_stalled_target_is_ejected_by_its_timeouts_which_are_not_retried(three, tmp_path):
    a, b, c = three
    b.pause()                                        # the kernel accepts; nothing ever answers
    upstream = ", read_timeout_s: 1, eject_after: 2, eject_base_s: 2, health_path: null"
    async with pool_gateway([m.url for m in three], tmp_path, upstream) as gw, gw.client(timeout=20) as client:
        answers = [await client.post(gw.url + URL, json=chat(max_tokens=8)) for _ in range(9)]
        records = records_by_id(gw)
        timed_out = [r for r in answers if r.status_code != 200]
        assert [r.status_code for r in timed_out] == [504, 504]          # eject_after, then no more
        for r in timed_out:
            record = records[r.headers["x-request-id"]]
            assert r.json()["error"]["code"] == "upstream_timeout" and record["notes"]["targets"] == [b.label]
        assert {served_by(records[r.headers["x-request-id"]]) for r in answers[5:]} == {a.label, c.label}
        assert await _gauge(gw, b.label, 0)
        b.resume()
        await asyncio.sleep(2)                       # its back-off: readmitted, in its turn again
        before = b.work()
        for _ in range(6):
            assert (await client.post(gw.url + URL, json=chat(max_tokens=8))).status_code == 200
        assert b.work() - before >= 1 and await _gauge(gw, b.label, 1)


async def test_retry_on_timeout_asks_another_target(three, tmp_path):
    a, b, c = three
    b.pause()
    upstream = ", read_timeout_s: 1, retry_on_timeout: true, eject_after: 5, health_path: null"
    async with pool_gateway([m.url for m in three], tmp_path, upstream) as gw, gw.client(timeout=20) as client:
        answers = [await client.post(gw.url + URL, json=chat(max_tokens=8)) for _ in range(3)]
        records = records_by_id(gw)
    assert [r.status_code for r in answers] == [200, 200, 200]
    tried = [records[r.headers["x-request-id"]]["notes"]["targets"] for r in answers]
    assert [b.label, a.label] in tried or [b.label, c.label] in tried


async def test_a_refused_connection_is_retried_and_without_failover_refunded(live, tmp_path):
    dead = dead_url()
    upstream = ", health_path: null, eject_after: 100"
    async with pool_gateway([dead, live.url], tmp_path, upstream) as gw, gw.client() as client:
        answers = [await client.post(gw.url + URL, json=chat(max_tokens=8)) for _ in range(4)]
        records = records_by_id(gw)
        assert [r.status_code for r in answers] == [200] * 4
        retried = [records[r.headers["x-request-id"]] for r in answers
                   if len(records[r.headers["x-request-id"]]["notes"]["targets"]) == 2]
        assert len(retried) == 2
        for record in retried:
            assert record["notes"]["targets"] == [dead[7:-3], live.label]
            assert "cannot connect" in record["notes"]["failover"][0]["error"]
            assert record["notes"]["budget"]["actual"] == record["usage"]["prompt_tokens"] + \
                record["usage"]["completion_tokens"]
    async with pool_gateway([dead, live.url], tmp_path, upstream + ", max_attempts: 1") as gw, \
            gw.client() as client:
        answers = [await client.post(gw.url + URL, json=chat(max_tokens=8)) for _ in range(2)]
        records = records_by_id(gw)
    failed = [r for r in answers if r.status_code != 200]
    assert len(failed) == 1 and failed[0].status_code == 502
    assert failed[0].json()["error"]["code"] == "upstream_unavailable"
    assert "127.0.0.1" not in failed[0].text                      # never the address
    assert records[failed[0].headers["x-request-id"]]["notes"]["budget"]["actual"] == 0


async def _answering_503() -> tuple[asyncio.AbstractServer, str]:
    """A backend that answers every request 503 (an engine shedding load, a proxy without one)."""
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                await read_request(reader)
                writer.write(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 2\r\n\r\n{}")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"


async def test_a_503_is_retried_on_another_target(live, tmp_path):
    server, shedding = await _answering_503()
    upstream = ", health_path: null, eject_after: 100"
    try:
        async with pool_gateway([shedding, live.url], tmp_path, upstream) as gw, gw.client() as client:
            answers = [await client.post(gw.url + URL, json=chat(max_tokens=8)) for _ in range(4)]
            records = records_by_id(gw)
            assert [r.status_code for r in answers] == [200] * 4
            retried = [records[r.headers["x-request-id"]]["notes"] for r in answers]
            assert sum(len(n["targets"]) == 2 for n in retried) == 2
            assert all(n["failover"][0]["error"] == "answered 503" for n in retried if "failover" in n)
        async with pool_gateway([shedding, live.url], tmp_path, upstream + ", max_attempts: 1") as gw, \
                gw.client() as client:
            answers = [await client.post(gw.url + URL, json=chat(max_tokens=8)) for _ in range(2)]
        assert sorted(r.status_code for r in answers) == [200, 503]
        assert [r.json()["error"]["code"] for r in answers if r.status_code == 503] == ["upstream_overloaded"]
    finally:
        server.close()


async def test_readyz_is_503_only_when_a_required_pool_has_no_healthy_target(live, tmp_path):
    upstream = ", health_interval_s: 0.2, health_timeout_s: 0.5"
    async with pool_gateway([dead_url(), live.url], tmp_path, upstream) as gw, gw.client() as client:
        await asyncio.sleep(0.5)
        ready = await client.get(gw.url + "/readyz")
        assert ready.status_code == 200
        assert {k: ready.json()["upstreams"]["pool"][k] for k in ("healthy", "targets", "targets_healthy")} == {
            "healthy": True, "targets": 2, "targets_healthy": 1}
        assert "127.0.0.1" not in ready.text                          # /readyz is public: counts, no addresses
    async with pool_gateway([dead_url(), dead_url()], tmp_path, upstream) as gw, gw.client() as client:
        ready = await client.get(gw.url + "/readyz")
        assert ready.status_code == 503 and ready.json()["upstreams"]["pool"]["targets_healthy"] == 0
    async with pool_gateway([dead_url(), dead_url()], tmp_path, upstream + ", ready_required: false") as gw, \
            gw.client() as client:
        assert (await client.get(gw.url + "/readyz")).status_code == 200
