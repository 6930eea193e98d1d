"""Real ``tokenward serve`` processes: three replicas sharing one Redis budget, one replica on
the memory store, three sharing a Redis Cluster, and a replica killed while it holds a
reservation."""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path

import httpx
import orjson
import pytest
import yaml

from tokenward.budget.limits import tenant_namespace
from tokenward.budget.redis import RedisStore

from .gateway_helpers import backend, budget_config, chat, create_key, spawn

TPM = 2100
NS = tenant_namespace("tw", "acme")


def replica_configs(base: Path, count: int) -> list[Path]:
    """The same config for each replica, each writing its own decision log."""
    raw = yaml.safe_load(base.read_text())
    paths = []
    for i in range(count):
        raw["logging"]["decisions"] = str(base.parent / f"decisions-{i}.jsonl")
        path = base.parent / f"replica-{i}.yaml"
        path.write_text(yaml.safe_dump(raw))
        paths.append(path)
    return paths


def reservations(tmp_path: Path) -> list[int]:
    out = []
    for path in tmp_path.glob("decisions-*.jsonl"):
        for line in path.read_bytes().splitlines():
            record = orjson.loads(line)
            note = (record.get("notes") or {}).get("budget")
            if record.get("status") == 200 and isinstance(note, dict):
                out.append(note["reserved"])
    return out


@pytest.mark.parametrize("replicas, shared", [(3, "redis_server"), (3, "redis_cluster"), (1, None)],
                         ids=["3-replicas-redis", "3-replicas-redis-cluster", "1-replica-memory"])
async def test_a_burst_across_replicas_never_exceeds_the_budget(tmp_path, replicas, shared, request):
    # The config says memory; TOKENWARD_STORE_URL switches the replicas to the shared Redis.
    env = {}
    if shared is not None:
        server = request.getfixturevalue(shared)
        if shared == "redis_cluster":
            server.flush()
        env = {"TOKENWARD_STORE_URL": server.url}
    async with backend() as mock:
        base = budget_config(tmp_path, mock.port, "memory", tpm=TPM, max_output=200)
        key = create_key(base)
        # in a thread: the mock runs in this loop and must answer the replicas' readiness probes
        procs = [await asyncio.to_thread(spawn, path, env) for path in replica_configs(base, replicas)]
        try:
            async with httpx.AsyncClient(timeout=20, limits=httpx.Limits(max_connections=100)) as client:
                headers = {**key, "x-mock-hold": "burst"}
                started = time.monotonic()
                tasks = [asyncio.ensure_future(client.post(procs[i % replicas].url + "/v1/chat/completions",
                                                           json=chat(max_tokens=200), headers=headers))
                         for i in range(30)]
                done, _ = await asyncio.wait(tasks, timeout=3)   # the refusals come back at once
                elapsed = time.monotonic() - started
                admitted_in_backend = await mock.requests()
                await mock.release("burst")
                responses = [await t for t in tasks]
        finally:
            for proc in procs:
                proc.stop()
        admitted = [r for r in responses if r.status_code == 200]
        refused = [r for r in responses if r.status_code != 200]
        assert len(admitted) == admitted_in_backend       # refusals never reached the backend
        assert all(r.status_code == 429 and r.json()["error"]["code"] == "token_budget" for r in refused), \
            [(r.status_code, r.text[:200]) for r in refused]
        per_request = set(reservations(tmp_path))
        assert len(per_request) == 1, per_request
        [work] = per_request
        refill = math.ceil(TPM / 60 * elapsed)
        assert len(admitted) * work <= TPM + refill        # admitted worst case never exceeds the budget
        assert len(admitted) >= TPM // work                # and nothing that fit was refused
        assert len(done) == len(refused)


async def test_a_killed_replicas_reservation_is_reconciled_after_its_lease(tmp_path, redis_server):
    async with backend() as mock:
        base = budget_config(tmp_path, mock.port, redis_server.url, tpm=TPM, max_output=200, lease_s=1.0)
        key = create_key(base)
        doomed, survivor = [await asyncio.to_thread(spawn, path) for path in replica_configs(base, 2)]
        store = RedisStore(redis_server.url, timeout_s=1.0)
        try:
            async with httpx.AsyncClient(timeout=20) as client:
                started = time.monotonic()
                held = asyncio.ensure_future(client.post(doomed.url + "/v1/chat/completions",
                                                         json=chat(max_tokens=200),
                                                         headers={**key, "x-mock-hold": "doomed"}))
                await mock.wait_held(1)
                assert await store.open_reservations(NS + ":leases") == 1
                await asyncio.sleep(1.5)                     # renewed while its replica lives
                assert await store.open_reservations(NS + ":leases") == 1
                doomed.kill()
                with pytest.raises(httpx.HTTPError):
                    await held
                assert await store.value(NS + ":g:streams") == 1
                deadline = time.monotonic() + 5
                while await store.open_reservations(NS + ":leases"):
                    assert time.monotonic() < deadline, "the survivor never reconciled the dead lease"
                    await asyncio.sleep(0.05)
                assert await store.value(NS + ":g:streams") is None
                level = (await store.value(NS + ":b:tokens"))[0] // 60_000
                refill = math.ceil(TPM / 60 * (time.monotonic() - started))
                assert level <= TPM - 200 + refill           # charged in full: at least the 200 output
                ok = await client.post(survivor.url + "/v1/chat/completions", json=chat(max_tokens=20), headers=key)
                assert ok.status_code == 200
        finally:
            await mock.release("doomed")
            await store.close()
            doomed.stop()
            survivor.stop()
