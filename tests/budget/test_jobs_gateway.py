"""Agent jobs through a real gateway over loopback: the /v1/jobs routes, requests joining a
job, terminal refusals that never reach the backend, cancellation of open streams."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from tokenward.budget.limits import safe, tenant_namespace
from tokenward.budget.policy import SCALE, periods

from .conftest import FakeClock
from .gateway_helpers import backend, budget_config, chat, in_process

JOBS = {"max_job_tokens": 5000, "max_open_jobs": 8, "jobs_per_minute": 30}
TEAM = {"models": ["small-chat"], "max_output_tokens": 200, "tokens_per_minute": 100_000,
        "requests_per_minute": 100_000, "max_concurrent_streams": 100}


def config(tmp_path, port, store_url="memory", jobs=None, **extra):
    plans = {"team": {**TEAM, **JOBS, **(jobs or {})}}
    return budget_config(tmp_path, port, store_url, plans=plans, **extra)


@pytest.fixture(params=["memory", "redis"])
def store_url(request):
    if request.param == "memory":
        return "memory"
    server = request.getfixturevalue("redis_server")
    return server.url


async def new_job(gw, key, **body) -> dict:
    resp = await gw.client.post("/v1/jobs", json=body, headers=key)
    assert resp.status_code == 201, resp.text
    return resp.json()


def refused(resp: httpx.Response, status: int, code: str) -> None:
    assert resp.status_code == status, resp.text
    assert resp.json()["error"]["code"] == code, resp.text


async def test_a_jobs_budget_is_terminal_and_refusals_never_reach_the_backend(tmp_path, store_url):
    async with backend() as mock:
        async with in_process(config(tmp_path, mock.port, store_url)) as gw:
            key = await gw.new_key()
            job = await new_job(gw, key, budget_tokens=100)
            assert job["id"].startswith("job_") and job["state"] == "open" and job["remaining_tokens"] == 100
            headers = {**key, "x-tokenward-job": job["id"]}
            ok = await gw.client.post("/v1/chat/completions", json=chat(max_tokens=40), headers=headers)
            assert ok.status_code == 200, ok.text
            seen = await mock.requests()
            over = await gw.client.post("/v1/chat/completions", json=chat(max_tokens=90), headers=headers)
            refused(over, 429, "job_budget_exhausted")
            assert over.headers["x-should-retry"] == "false"
            assert "1 of its 1 admitted attempts finished" in over.json()["error"]["message"]
            # terminal: even a request that would fit is refused now
            small = await gw.client.post("/v1/chat/completions", json=chat(max_tokens=1), headers=headers)
            refused(small, 429, "job_budget_exhausted")
            assert await mock.requests() == seen
            state = (await gw.client.get(f"/v1/jobs/{job['id']}", headers=key)).json()
            assert state["state"] == "exhausted" and state["attempts"] == 1 and state["reserved_tokens"] == 0
            assert state["spent_tokens"] == ok.json()["usage"]["total_tokens"]
            # a control request outside the job still gets through
            control = await gw.client.post("/v1/chat/completions", json=chat(max_tokens=90), headers=key)
            assert control.status_code == 200 and await mock.requests() == seen + 1
            await gw.settled()
            # the measures: per job request outcome, tokens charged, denied work by kind
            assert {k[1]: v for k, v in gw.gateway.parts.work.job_requests.items() if k[0] == "acme"} == {
                "admitted": 1, "completed": 1, "refused_terminal": 2}
            assert gw.gateway.parts.work.job_spent["acme"] == state["spent_tokens"]
            assert gw.gateway.parts.work.refused_tokens[("acme", "terminal")] > 0 and gw.gateway.parts.work.jobs[("acme", "exhausted")] == 1


async def test_a_made_up_or_another_tenants_job_is_not_found(tmp_path, store_url):
    async with backend() as mock:
        path = config(tmp_path, mock.port, store_url, tenants={"acme": {"plan": "team"}, "globex": {"plan": "team"}})
        async with in_process(path) as gw:
            acme, globex = await gw.new_key("acme"), await gw.new_key("globex")
            theirs = await new_job(gw, globex, budget_tokens=100)
            for job_id in (theirs["id"], "job_" + "a" * 26, "job_nope", "x" * 5000):
                resp = await gw.client.post("/v1/chat/completions", json=chat(max_tokens=5),
                                            headers={**acme, "x-tokenward-job": job_id})
                refused(resp, 404, "job_not_found")
                refused(await gw.client.get(f"/v1/jobs/{job_id[:100]}", headers=acme), 404, "job_not_found")
                refused(await gw.client.delete(f"/v1/jobs/{job_id[:100]}", headers=acme), 404, "job_not_found")
                refused(await gw.client.post("/v1/jobs", json={"budget_tokens": 5, "parent": job_id[:100]},
                                             headers=acme), 404, "job_not_found")
            assert await mock.requests() == 0
            ok = await gw.client.post("/v1/chat/completions", json=chat(max_tokens=5),
                                      headers={**globex, "x-tokenward-job": theirs["id"]})
            assert ok.status_code == 200 and await mock.requests() == 1


async def test_children_carve_from_the_parent_and_bounds_hold(tmp_path):
    async with backend() as mock:
        async with in_process(config(tmp_path, mock.port)) as gw:
            key = await gw.new_key()
            parent = await new_job(gw, key, budget_tokens=100, max_children=2)
            child = await new_job(gw, key, budget_tokens=60, parent=parent["id"])
            assert child["parent"] == parent["id"]
            too_big = await gw.client.post("/v1/jobs", json={"budget_tokens": 41, "parent": parent["id"]}, headers=key)
            refused(too_big, 429, "job_budget_exhausted")
            assert "40 tokens of its 100 tokens left" in too_big.json()["error"]["message"]
            await new_job(gw, key, budget_tokens=10, parent=parent["id"])
            third = await gw.client.post("/v1/jobs", json={"budget_tokens": 1, "parent": parent["id"]}, headers=key)
            refused(third, 429, "job_budget_exhausted")
            view = (await gw.client.get(f"/v1/jobs/{parent['id']}", headers=key)).json()
            assert view["carved_tokens"] == 70 and view["remaining_tokens"] == 30 and view["children"] == 2
            # cancelling the child hands its unused allowance back
            gone = (await gw.client.delete(f"/v1/jobs/{child['id']}", headers=key)).json()
            assert gone["state"] == "cancelled"
            view = (await gw.client.get(f"/v1/jobs/{parent['id']}", headers=key)).json()
            assert view["remaining_tokens"] == 90
            resp = await gw.client.post("/v1/chat/completions", json=chat(max_tokens=5),
                                        headers={**key, "x-tokenward-job": child["id"]})
            refused(resp, 409, "job_cancelled")
            assert await mock.requests() == 0


async def test_a_job_budgeted_in_usd_is_charged_what_its_requests_cost(tmp_path, store_url):
    """A job's budget in cost units: each request reserves its worst-case cost against the
    job, then the key's and tenant's buckets and the day's spend, in one step; settle gives
    back the difference at every level; an exhausted job refuses requests and children."""
    clock = FakeClock()   # no refill between reading a bucket and asserting on it
    plan = {"key_tokens_per_minute": 50_000, "daily_spend_usd": 5.0, "models": ["small-chat", "free-chat"]}
    async with backend() as mock:
        path = config(tmp_path, mock.port, store_url, jobs=plan,
                      models={"free-chat": {"upstream": "mock", "context_window": 32768}})
        async with in_process(path, clock=clock) as gw:
            plaintext, record = await gw.gateway.parts.keys.create("acme")
            key = {"authorization": f"Bearer {plaintext}"}
            ns = tenant_namespace("tw", "acme")
            job = await new_job(gw, key, budget_usd=0.0002)
            assert job["unit"] == "usd" and job["budget_usd"] == 0.0002 and job["remaining_usd"] == 0.0002
            assert job["budget_tokens"] is None
            headers = {**key, "x-tokenward-job": job["id"]}
            ok = await gw.client.post("/v1/chat/completions", json=chat(max_tokens=40), headers=headers)
            assert ok.status_code == 200, ok.text
            usage = ok.json()["usage"]
            cost = usage["prompt_tokens"] * 1 + usage["completion_tokens"] * 2   # micro-USD at $1 / $2 per M
            await gw.settled()
            view = (await gw.client.get(f"/v1/jobs/{job['id']}", headers=key)).json()
            assert view["spent_usd"] == cost / 1e6 and view["reserved_usd"] == 0
            assert view["remaining_usd"] == pytest.approx((200 - cost) / 1e6)
            # the tenant's and the key's buckets and the day's spend got their refunds too
            day = periods(int(clock.now * 1000)).day
            assert (await gw.store.value(f"{ns}:b:tokens"))[0] // SCALE == 100_000 - usage["total_tokens"]
            key_bucket = await gw.store.value(f"{ns}:k:{safe(record.id)}:b:tokens")
            assert key_bucket[0] // SCALE == 50_000 - usage["total_tokens"]
            assert await gw.store.value(f"{ns}:s:d:{day}") == cost
            seen = await mock.requests()
            over = await gw.client.post("/v1/chat/completions", json=chat(max_tokens=90), headers=headers)
            refused(over, 429, "job_budget_exhausted")
            message = over.json()["error"]["message"]
            assert over.headers["x-should-retry"] == "false"
            assert f"${(200 - cost) / 1e6:.6f} are left" in message and "1 of its 1 admitted attempts" in message
            # exhausted: terminal for requests and for children alike
            child = await gw.client.post("/v1/jobs", json={"budget_usd": 0.000001, "parent": job["id"]}, headers=key)
            refused(child, 429, "job_budget_exhausted")
            assert (await gw.store.value(f"{ns}:b:tokens"))[0] // SCALE == 100_000 - usage["total_tokens"]
            # one unit down a tree; a USD job runs only priced models
            other = await new_job(gw, key, budget_usd=0.001)
            mixed = await gw.client.post("/v1/jobs", json={"budget_tokens": 10, "parent": other["id"]}, headers=key)
            refused(mixed, 400, "invalid_field")
            assert mixed.json()["error"]["param"] == "budget_tokens"
            free = await gw.client.post("/v1/chat/completions", json={**chat(max_tokens=5), "model": "free-chat"},
                                        headers={**key, "x-tokenward-job": other["id"]})
            refused(free, 400, "invalid_field")
            assert "no price" in free.json()["error"]["message"]
            for body in ({"budget_usd": 0.0}, {"budget_usd": 10.5}, {"budget_usd": 1.0, "budget_tokens": 5}):
                refused(await gw.client.post("/v1/jobs", json=body, headers=key), 400, "invalid_field")
            assert await mock.requests() == seen
            # the controls: the same model outside the job, and a priced request in the USD job
            free_ok = await gw.client.post("/v1/chat/completions", json={**chat(max_tokens=5), "model": "free-chat"},
                                           headers=key)
            paid_ok = await gw.client.post("/v1/chat/completions", json=chat(max_tokens=5),
                                           headers={**key, "x-tokenward-job": other["id"]})
            assert free_ok.status_code == 200 and paid_ok.status_code == 200
            assert await mock.requests() == seen + 2


async def test_job_terms_are_checked_precisely(tmp_path):
    async with backend() as mock:
        async with in_process(config(tmp_path, mock.port)) as gw:
            key = await gw.new_key()
            cases = [({"budget_tokens": 5001}, "invalid_field", "max_job_tokens"),
                     ({"budget_tokens": 0}, "invalid_field", "budget_tokens"),
                     ({"budget_tokens": "ten"}, "invalid_field", "budget_tokens"),
                     ({"budget_tokens": 10, "colour": "red"}, "unknown_field", "colour"),
                     ({"budget_tokens": 10, "max_seconds": 99999}, "invalid_field", "max_job_seconds"),
                     ({"budget_tokens": 10, "max_attempts": 0}, "invalid_field", "max_attempts"),
                     ({}, "invalid_field", "budget_tokens")]
            for body, code, mentioned in cases:
                resp = await gw.client.post("/v1/jobs", json=body, headers=key)
                refused(resp, 400, code)
                assert mentioned in resp.json()["error"]["message"], resp.text
            refused(await gw.client.post("/v1/jobs", content=b"{", headers={**key, "content-type": "application/json"}),
                    400, "invalid_json")
            refused(await gw.client.post("/v1/jobs", json={"budget_tokens": 5}), 401, "missing_credentials")
            refused(await gw.client.put("/v1/jobs", json={"budget_tokens": 5}, headers=key), 405, "method_not_allowed")
            refused(await gw.client.get("/v1/jobs/a/b", headers=key), 404, "route_denied")
            assert (await gw.client.post("/v1/jobs", json={"budget_tokens": 5}, headers=key)).status_code == 201


async def test_creation_is_bounded_per_plan(tmp_path):
    async with backend() as mock:
        path = config(tmp_path, mock.port, jobs={"max_open_jobs": 2, "jobs_per_minute": 3})
        async with in_process(path) as gw:
            key = await gw.new_key()
            first = await new_job(gw, key, budget_tokens=10)
            await new_job(gw, key, budget_tokens=10)
            refused(await gw.client.post("/v1/jobs", json={"budget_tokens": 10}, headers=key), 429, "concurrency_limit")
            await gw.client.delete(f"/v1/jobs/{first['id']}", headers=key)
            await new_job(gw, key, budget_tokens=10)
            await gw.client.delete(f"/v1/jobs/{first['id']}", headers=key)
            rate = await gw.client.post("/v1/jobs", json={"budget_tokens": 10}, headers=key)
            refused(rate, 429, "rate_limited")
            assert int(rate.headers["retry-after"]) >= 1


async def test_cancel_ends_open_streams_within_100ms_and_settles(tmp_path, store_url):
    async with backend() as mock:
        async with in_process(config(tmp_path, mock.port, store_url)) as gw:
            key = await gw.new_key()
            parent = await new_job(gw, key, budget_tokens=3000)
            child = await new_job(gw, key, budget_tokens=1000, parent=parent["id"])
            ends: list[float] = []
            bodies: list[bytes] = []

            async def stream(job_id: str) -> None:
                headers = {**key, "x-tokenward-job": job_id, "x-mock-token-rate": "20", "x-mock-tokens": "190"}
                async with gw.client.stream("POST", "/v1/chat/completions", headers=headers,
                                            json=chat(max_tokens=190, stream=True)) as resp:
                    assert resp.status_code == 200
                    body = b""
                    async for chunk in resp.aiter_bytes():
                        body += chunk
                    ends.append(time.monotonic())
                    bodies.append(body)

            tasks = [asyncio.ensure_future(stream(j)) for j in (parent["id"], child["id"], child["id"])]
            deadline = time.monotonic() + 5
            while (await mock.stats())["active_streams"] < 3:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.2)
            before = await mock.requests()
            cancelled_at = time.monotonic()
            resp = await gw.client.delete(f"/v1/jobs/{parent['id']}", headers=key)
            assert resp.status_code == 200 and resp.json()["state"] == "cancelled"
            await asyncio.gather(*tasks)
            assert max(ends) - cancelled_at < 0.1, max(ends) - cancelled_at
            assert all(b'"code":"job_cancelled"' in body and b"[DONE]" not in body for body in bodies)
            stats = await mock.stats()
            assert stats["active_streams"] == 0 and stats["cancelled"] >= 3
            await gw.settled()
            after = (await gw.client.get(f"/v1/jobs/{child['id']}", headers=key)).json()
            assert after["state"] == "cancelled" and after["reserved_tokens"] == 0 and after["open_attempts"] == 0
            assert 0 < after["spent_tokens"] < 3 * 200
            # nothing new is dispatched
            late = await gw.client.post("/v1/chat/completions", json=chat(max_tokens=5),
                                        headers={**key, "x-tokenward-job": child["id"]})
            refused(late, 409, "job_cancelled")
            assert await mock.requests() == before


async def test_a_jobs_deadline_ends_its_open_streams_and_refuses_more(tmp_path):
    async with backend() as mock:
        async with in_process(config(tmp_path, mock.port)) as gw:
            key = await gw.new_key()
            job = await new_job(gw, key, budget_tokens=3000, max_seconds=1.0)
            headers = {**key, "x-tokenward-job": job["id"], "x-mock-token-rate": "10", "x-mock-tokens": "190"}
            started = time.monotonic()
            async with gw.client.stream("POST", "/v1/chat/completions", headers=headers,
                                        json=chat(max_tokens=190, stream=True)) as resp:
                body = b"".join([chunk async for chunk in resp.aiter_bytes()])
            ended = time.monotonic() - started
            assert b'"code":"job_expired"' in body and b"[DONE]" not in body
            assert ended < 1.0 + 0.3, ended                 # the deadline, plus a watcher tick or two
            seen = await mock.requests()
            late = await gw.client.post("/v1/chat/completions", json=chat(max_tokens=5), headers=headers)
            refused(late, 429, "job_expired")
            assert late.headers["x-should-retry"] == "false" and await mock.requests() == seen
            assert (await gw.client.get(f"/v1/jobs/{job['id']}", headers=key)).json()["state"] == "expired"
            await gw.settled()
