"""Three ``tokenward serve`` processes sharing one Redis drive one agent job: the job's bound
holds exactly across them, and a cancel on one replica ends the job's open streams on the
others (their watchers read the job's state from the store)."""

from __future__ import annotations

import asyncio
import time

import httpx

from tokenward.budget.limits import tenant_namespace
from tokenward.budget.redis import RedisStore

from .gateway_helpers import backend, budget_config, create_key, spawn
from .test_replicas import replica_configs

PLAN = {"models": ["small-chat"], "max_output_tokens": 200, "tokens_per_minute": 1_000_000,
        "requests_per_minute": 100_000, "max_concurrent_streams": 500, "max_job_tokens": 100_000}
PER = 22          # what each request reserves: prompt "go" (2) + max_tokens 20
BUDGET = 1000     # 45 requests fit (990), the 46th does not


def completion(**extra) -> dict:
    return {"model": "small-chat", "prompt": "go", "max_tokens": 20, **extra}


async def test_three_replicas_hold_one_jobs_bound_exactly(tmp_path, redis_server):
    async with backend() as mock:
        base = budget_config(tmp_path, mock.port, "memory", plans={"team": PLAN})
        key = create_key(base)
        env = {"TOKENWARD_STORE_URL": redis_server.url}
        procs = [await asyncio.to_thread(spawn, path, env) for path in replica_configs(base, 3)]
        store = RedisStore(redis_server.url, timeout_s=1.0)
        try:
            async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=200)) as client:
                job = (await client.post(procs[1].url + "/v1/jobs", json={"budget_tokens": BUDGET},
                                         headers=key)).json()["id"]
                headers = {**key, "x-tokenward-job": job, "x-mock-hold": "burst"}
                tasks = [asyncio.ensure_future(client.post(procs[i % 3].url + "/v1/completions", json=completion(),
                                                           headers=headers)) for i in range(90)]
                # The refusals come back at once; the admitted ones are held. Wait for the
                # refusals, not a fixed 10 s: the held requests' backend read timeout is 10 s
                # too (budget_config), and a release after it raced their timeouts.
                done: set = set()
                for _ in range(500):
                    done = {t for t in tasks if t.done()}
                    if len(done) >= 90 - BUDGET // PER:
                        break
                    await asyncio.sleep(0.02)
                await mock.wait_held(BUDGET // PER)
                [record] = await store.jobs(tenant_namespace("tw", "acme"), [job])
                assert record.value.held == record.value.used == (BUDGET // PER) * PER
                in_backend = await mock.requests()
                await mock.release("burst")
                responses = [await t for t in tasks]
                view = (await client.get(procs[2].url + f"/v1/jobs/{job}", headers=key)).json()
        finally:
            await store.close()
            for proc in procs:
                proc.stop()
        admitted = [r for r in responses if r.status_code == 200]
        refused = [r for r in responses if r.status_code != 200]
        assert len(admitted) == BUDGET // PER == in_backend == 45    # exactly: not one more, not one less
        assert len(done) == len(refused) == 90 - 45
        assert all(r.status_code == 429 and r.json()["error"]["code"] == "job_budget_exhausted"
                   and r.headers["x-should-retry"] == "false" for r in refused)
        assert view["state"] == "exhausted" and view["attempts"] == 45 and view["reserved_tokens"] == 0


async def test_a_cancel_on_one_replica_ends_the_jobs_streams_on_the_others(tmp_path, redis_server):
    """Streams of the job open on the two other replicas end within 100 ms of the cancel
    (from the moment the DELETE answered: the cancel is in the store), their backend
    requests are cancelled, and their reservations settle on what the streams had shown."""
    async with backend() as mock:
        base = budget_config(tmp_path, mock.port, "memory", plans={"team": PLAN})
        key = create_key(base)
        env = {"TOKENWARD_STORE_URL": redis_server.url}
        procs = [await asyncio.to_thread(spawn, path, env) for path in replica_configs(base, 3)]
        store = RedisStore(redis_server.url, timeout_s=1.0)
        ns = tenant_namespace("tw", "acme")
        try:
            async with httpx.AsyncClient(timeout=30) as client:
                job = (await client.post(procs[0].url + "/v1/jobs", json={"budget_tokens": BUDGET},
                                         headers=key)).json()["id"]
                ends: dict[int, float] = {}

                async def stream(i: int) -> bytes:
                    headers = {**key, "x-tokenward-job": job, "x-mock-token-rate": "10"}
                    async with client.stream("POST", procs[i].url + "/v1/completions", headers=headers,
                                             json=completion(stream=True)) as resp:
                        body = b"".join([chunk async for chunk in resp.aiter_bytes()])
                    ends[i] = time.monotonic()
                    return body

                before = await mock.stats()
                tasks = [asyncio.ensure_future(stream(i)) for i in (1, 2)]
                deadline = time.monotonic() + 10
                while (await mock.stats())["active_streams"] < 2:
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.02)
                await asyncio.sleep(0.15)    # a token or two streamed: the settle has usage to go on
                cancel = await client.delete(procs[0].url + f"/v1/jobs/{job}", headers=key)
                cancelled_at = time.monotonic()
                assert cancel.status_code == 200 and cancel.json()["state"] == "cancelled"
                bodies = await asyncio.gather(*tasks)
                late = await client.post(procs[2].url + "/v1/completions", json=completion(),
                                         headers={**key, "x-tokenward-job": job})
                deadline = time.monotonic() + 5
                while (after := await mock.stats())["cancelled"] < before["cancelled"] + 2 \
                        or await store.open_reservations(ns + ":leases"):
                    assert time.monotonic() < deadline, after
                    await asyncio.sleep(0.02)
                [record] = await store.jobs(ns, [job])
        finally:
            await store.close()
            for proc in procs:
                proc.stop()
        assert all(b'"code":"job_cancelled"' in body for body in bodies), bodies
        assert all(b"[DONE]" not in body for body in bodies)
        took = max(ends.values()) - cancelled_at
        assert took < 0.1, took
        assert late.status_code == 409 and late.json()["error"]["code"] == "job_cancelled"
        # the backend stopped generating for both; the job holds nothing and was charged
        # only what the two streams had produced before the cancel (not their 22 each)
        assert after["active_streams"] == 0 and after["cancelled"] == before["cancelled"] + 2
        value = record.value
        assert value.held == 0 and value.open == 0 and value.attempts == 2
        assert 0 < value.used < 2 * PER, value
