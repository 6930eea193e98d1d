"""Three ``tokenward serve`` processes on one Redis and one key store: an automatic
suspension and its reinstatement reach every replica at once; cancelling a tenant's streams
ends them on every replica within 100 ms (the mock backend's counters prove generation
stopped, the shared budget shows every reservation settled); a capability paused from the
CLI is refused on every replica without reaching the backend, and resumed."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest

from tests.identity.conftest import ADMIN_TOKEN, bearer, chat, write_config
from tests.identity.processes import ServeProcess, cli
from tokenward.budget.limits import tenant_namespace
from tokenward.budget.redis import RedisStore

ADMIN = bearer(ADMIN_TOKEN)
SLOW = {"x-mock-token-rate": "40", "x-mock-tokens": "100000"}


async def _replicas(config, n: int = 3) -> list[ServeProcess]:
    procs = [ServeProcess(config) for _ in range(n)]
    try:
        # in threads: the mock backend runs in this loop and must answer their readiness probes
        await asyncio.gather(*(asyncio.to_thread(p.ready) for p in procs))
    except BaseException:
        for p in procs:
            p.stop()
        raise
    return procs


async def _until(client: httpx.AsyncClient, url: str, body: dict, headers: dict, want: int, limit_s: float) -> float:
    started = time.monotonic()
    while True:
        resp = await client.post(url + "/v1/chat/completions", json=body, headers=headers)
        elapsed = time.monotonic() - started
        if resp.status_code == want:
            return elapsed
        assert elapsed < limit_s, f"{url}: still {resp.status_code} after {elapsed:.2f}s: {resp.text}"
        await asyncio.sleep(0.01)


async def test_automatic_suspension_and_reinstatement_on_every_replica(tmp_path, backend, redis_server):
    rules = [{"name": "burst", "when": {"hour_requests": 6}, "action": "suspend", "duration_s": 3600}]
    config = write_config(tmp_path, backend.port, store={"url": redis_server.url},
                          abuse={"shadow": False, "batch_s": 0.1, "min_history_days": 0, "rules": rules})
    procs = await _replicas(config)
    try:
        key = (await asyncio.to_thread(cli, "keys", "create", "--config", str(config), "--tenant", "acme")).stdout.strip()
        other = (await asyncio.to_thread(cli, "keys", "create", "--config", str(config), "--tenant", "acme")).stdout.strip()
        async with httpx.AsyncClient(timeout=10) as client:
            for i in range(6):   # across the replicas: their batches add up in the shared store
                resp = await client.post(procs[i % 3].url + "/v1/chat/completions", json=chat(), headers=bearer(key))
                assert resp.status_code == 200, resp.text
            for proc in procs:   # the engine of one of them acts; every one refuses within a second
                await _until(client, proc.url, chat(), bearer(key), 403, 3.0)
            before = await backend.requests()
            resp = await client.post(procs[1].url + "/v1/chat/completions", json=chat(), headers=bearer(key))
            assert resp.json()["error"]["code"] == "key_suspended" and await backend.requests() == before
            assert (await client.post(procs[2].url + "/v1/chat/completions", json=chat(),
                                      headers=bearer(other))).status_code == 200
            done = await asyncio.to_thread(cli, "abuse", "reinstate", key, "--config", str(config), "--reason",
                                           "the customer's load test", "--reviewer", "carol", "--appeal", "overturned")
            assert done.returncode == 0, done.stderr
            waits = [await _until(client, p.url, chat(), bearer(key), 200, 1.0) for p in procs]
            assert max(waits) < 1.0, waits
            print(f"reinstatement: served again after {[round(w * 1000, 1) for w in waits]} ms per replica")
            for _ in range(3):   # the same hour's signals do not bring it back (the appeal's grace)
                await asyncio.sleep(0.2)
                assert (await client.post(procs[0].url + "/v1/chat/completions", json=chat(),
                                          headers=bearer(key))).status_code == 200
            audit = (await client.get(procs[0].url + f"/admin/audit?key_id={key[3:19]}", headers=ADMIN)).json()["data"]
        trail = [(a["action"], a["reason"], a["reviewer"], a["detail"].get("appeal")) for a in audit
                 if a["action"].startswith("abuse:")]
        assert trail[0] == ("abuse:suspend", "suspend: rule burst", "tokenward:abuse", None)
        assert trail[1] == ("abuse:reinstate", "the customer's load test", "carol", "overturned")
        assert trail[2][0] == "abuse:exempt" and len(trail) == 3
    finally:
        errors = "".join(p.stop() for p in procs)
    assert key[20:] not in errors


async def _stream(client, url, key, name, events, ended):
    body = chat(max_tokens=8000, stream=True)
    async with client.stream("POST", url + "/v1/chat/completions", json=body, headers={**key, **SLOW}) as resp:
        assert resp.status_code == 200, await resp.aread()
        async for line in resp.aiter_lines():
            if line.startswith("data: "):
                events.append((name, line[6:]))
    ended[name] = time.monotonic()


async def test_cancel_streams_ends_them_on_every_replica(tmp_path, backend, redis_server):
    config = write_config(tmp_path, backend.port, store={"url": redis_server.url},
                          tenants={"acme": {"plan": "team", "overrides": {"max_concurrent_streams": 20}}})
    procs = await _replicas(config)
    try:
        keys = [(await asyncio.to_thread(cli, "keys", "create", "--config", str(config), "--tenant", t)).stdout.strip()
                for t in ("acme", "acme", "umbrella")]
        events: list = []
        ended: dict = {}
        async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=50)) as client:
            tasks = {}
            for i, proc in enumerate(procs):
                for j in range(2):
                    name = f"acme-{i}-{j}"
                    tasks[name] = asyncio.ensure_future(_stream(client, proc.url, bearer(keys[j]), name, events, ended))
            tasks["umbrella"] = asyncio.ensure_future(_stream(client, procs[1].url, bearer(keys[2]), "umbrella",
                                                              events, ended))
            deadline = time.monotonic() + 10
            while (await backend.stats())["active_streams"] < 7 or len({n for n, _ in events}) < 7:
                assert time.monotonic() < deadline, await backend.stats()
                await asyncio.sleep(0.02)
            before = await backend.stats()
            asked = time.monotonic()
            resp = await client.post(procs[0].url + "/admin/tenants/acme/cancel-streams", headers=ADMIN,
                                     json={"reason": "runaway agent", "reviewer": "ops"})
            answered = time.monotonic()
            assert resp.status_code == 200, resp.text
            assert resp.json()["cancelled_here"] == 2 and resp.json()["replicas_notified"] == 3
            acme = [t for n, t in tasks.items() if n != "umbrella"]
            await asyncio.wait_for(asyncio.gather(*acme), 5)
            took = {n: round((t - asked) * 1000, 1) for n, t in ended.items()}
            assert max(took.values()) < 100, (took, round((answered - asked) * 1000, 1))
            print(f"cancel-streams: admin call {(answered - asked) * 1000:.1f} ms; streams ended after {took} ms")
            for name in tasks:
                if name != "umbrella":
                    assert json.loads([e for n, e in events if n == name][-1])["error"]["code"] == "stream_cancelled"
            stats = await backend.stats()
            assert stats["cancelled"] == before["cancelled"] + 6 and stats["active_streams"] == 1
            generated = stats["tokens_generated"]
            await asyncio.sleep(0.5)
            grown = (await backend.stats())["tokens_generated"] - generated
            assert 0 < grown <= 0.5 * 40 * 2   # only the other tenant's one stream is generating
            assert not tasks["umbrella"].done()
            tasks["umbrella"].cancel()
            await asyncio.gather(tasks["umbrella"], return_exceptions=True)
        store = RedisStore(redis_server.url, timeout_s=2.0)
        try:
            leases = tenant_namespace("tw", "acme") + ":leases"
            deadline = time.monotonic() + 5
            while await store.open_reservations(leases):
                assert time.monotonic() < deadline, "acme's reservations never settled"
                await asyncio.sleep(0.05)
        finally:
            await store.close()
    finally:
        for p in procs:
            p.stop()


async def test_a_paused_capability_is_refused_on_every_replica(tmp_path, backend, redis_server):
    config = write_config(tmp_path, backend.port, store={"url": redis_server.url})
    procs = await _replicas(config)
    try:
        key = (await asyncio.to_thread(cli, "keys", "create", "--config", str(config), "--tenant", "acme")).stdout.strip()
        theirs = (await asyncio.to_thread(cli, "keys", "create", "--config", str(config),
                                          "--tenant", "umbrella")).stdout.strip()
        done = await asyncio.to_thread(cli, "tenants", "pause", "acme", "streaming", "--for", "1h", "--reason",
                                       "stream flood", "--reviewer", "ops", "--config", str(config))
        assert done.returncode == 0, done.stderr
        assert "3 gateway process(es) heard it" in done.stdout
        streaming = chat(stream=True)
        async with httpx.AsyncClient(timeout=10) as client:
            for proc in procs:
                await _until(client, proc.url, streaming, bearer(key), 403, 1.0)
            before = await backend.requests()
            for proc in procs:
                resp = await client.post(proc.url + "/v1/chat/completions", json=streaming, headers=bearer(key))
                assert resp.status_code == 403 and resp.json()["error"]["code"] == "capability_paused"
                assert int(resp.headers["retry-after"]) > 3500
            assert await backend.requests() == before, "a paused request reached the backend"
            for proc in procs:   # not streaming, or another tenant: served
                assert (await client.post(proc.url + "/v1/chat/completions", json=chat(),
                                          headers=bearer(key))).status_code == 200
                assert (await client.post(proc.url + "/v1/chat/completions", json=streaming,
                                          headers=bearer(theirs))).status_code == 200
            resp = await client.post(procs[2].url + "/admin/tenants/acme/resume", headers=ADMIN,
                                     json={"capability": "streaming", "reason": "flood over"})
            assert resp.status_code == 200, resp.text
            for proc in procs:
                await _until(client, proc.url, streaming, bearer(key), 200, 1.0)
        audit = (await asyncio.to_thread(cli, "keys", "audit", "--config", str(config), "--json")).stdout
        trail = [(r["action"], r["scope"], r["reviewer"], r["reason"]) for r in map(json.loads, audit.splitlines())
                 if r["action"].startswith("tenant:")]
        assert trail == [("tenant:pause", "tenant:acme:streaming", "ops", "stream flood"),
                         ("tenant:resume", "tenant:acme:streaming", "admin-api", "flood over")]
    finally:
        for p in procs:
            p.stop()
