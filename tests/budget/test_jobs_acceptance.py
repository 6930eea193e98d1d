"""The issue's acceptance scenario: a parent with four child tasks of three attempts each,
each attempt asking for 20 output tokens, against a job of 100 tokens, through the HTTP
API with several concurrent clients using the official ``openai`` SDK and a real Redis.

Each attempt reserves 22 tokens (the prompt's bound and 20 of output): four fit in 100, and
the fifth attempt is refused terminally (``job_budget_exhausted``, ``x-should-retry:
false``); the SDK does not retry it (its default ``max_retries=2`` would otherwise send
each refused attempt three times); the job never has more than 100 tokens reserved; and a
made-up or another tenant's job id is ``job_not_found``. The backend's request counter
proves that no refused request reached it.
"""

from __future__ import annotations

import asyncio

import openai
import pytest

from tokenward.budget.limits import tenant_namespace

from .gateway_helpers import backend, budget_config, in_process

TASKS, ATTEMPTS, OUTPUT, BUDGET = 4, 3, 20, 100
PLAN = {"models": ["small-chat"], "max_output_tokens": 200, "tokens_per_minute": 100_000,
        "requests_per_minute": 100_000, "max_concurrent_streams": 100, "max_job_tokens": 10_000}


async def watch_job(store, ns: str, job_id: str, peaks: dict, stop: asyncio.Event) -> None:
    """Read the job's counters from the store as fast as it answers, keeping the peaks."""
    while not stop.is_set():
        [record] = await store.jobs(ns, [job_id])
        peaks["used"] = max(peaks["used"], record.value.used)
        peaks["held"] = max(peaks["held"], record.value.held)
        await asyncio.sleep(0.002)


async def test_four_tasks_of_three_attempts_against_a_100_token_job(tmp_path, redis_server):
    async with backend() as mock:
        path = budget_config(tmp_path, mock.port, redis_server.url, plans={"team": PLAN},
                             tenants={"acme": {"plan": "team"}, "globex": {"plan": "team"}})
        async with in_process(path) as gw:
            key = await gw.new_key()
            created = await gw.client.post("/v1/jobs", json={"budget_tokens": BUDGET}, headers=key)
            assert created.status_code == 201
            job = created.json()["id"]
            clients = [openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key=key["authorization"][7:])
                       for _ in range(TASKS)]
            outcomes: list[list[str]] = [[] for _ in range(TASKS)]
            refusals: list[openai.APIStatusError] = []

            async def task(i: int) -> None:
                for attempt in range(ATTEMPTS):
                    headers = {"x-tokenward-job": job, "x-mock-tokens": str(OUTPUT)}
                    if attempt == 0:
                        headers["x-mock-hold"] = "wave"
                    try:
                        await clients[i].completions.create(model="small-chat", prompt="go", max_tokens=OUTPUT,
                                                            extra_headers=headers)
                        outcomes[i].append("ran")          # the tool failed: the agent retries
                    except openai.RateLimitError as exc:
                        refusals.append(exc)
                        outcomes[i].append(exc.body["code"])
                        return                             # terminal: the task stops

            peaks = {"used": 0, "held": 0}
            stop = asyncio.Event()
            watcher = asyncio.ensure_future(watch_job(gw.store, tenant_namespace("tw", "acme"), job, peaks, stop))
            tasks = [asyncio.ensure_future(task(i)) for i in range(TASKS)]
            await mock.wait_held(TASKS)                    # all four first attempts are at the backend
            during = (await gw.client.get(f"/v1/jobs/{job}", headers=key)).json()
            assert during["reserved_tokens"] == 4 * 22 and during["open_attempts"] == 4
            await mock.release("wave")
            await asyncio.gather(*tasks)
            stop.set()
            await watcher

            assert [o[0] for o in outcomes] == ["ran"] * TASKS
            assert sorted(o[1] for o in outcomes) == ["job_budget_exhausted"] * TASKS
            assert await mock.requests() == TASKS          # only the four admitted attempts reached it
            assert peaks["used"] <= BUDGET and peaks["held"] <= BUDGET and peaks["held"] == 4 * 22
            for exc in refusals:
                assert exc.status_code == 429 and exc.response.headers["x-should-retry"] == "false"
                assert "4 of its 4 admitted attempts finished" in exc.body["message"]
            records = await gw.wait_decisions(TASKS * 2 + 2)
            refused = [r for r in records if r.get("reason") == "job_budget_exhausted"]
            assert len(refused) == TASKS                   # one request per refused attempt: no SDK retry
            view = (await gw.client.get(f"/v1/jobs/{job}", headers=key)).json()
            assert view["state"] == "exhausted" and view["attempts"] == TASKS and view["reserved_tokens"] == 0
            assert view["spent_tokens"] == TASKS * 21 and view["spent_tokens"] <= BUDGET

            # a client that mints its own id, or borrows another tenant's, gets nothing
            other = await gw.new_key("globex")
            theirs = (await gw.client.post("/v1/jobs", json={"budget_tokens": 1000}, headers=other)).json()["id"]
            for job_id in ("job_" + "q" * 26, theirs):
                with pytest.raises(openai.NotFoundError) as caught:
                    await clients[0].completions.create(model="small-chat", prompt="go", max_tokens=OUTPUT,
                                                        extra_headers={"x-tokenward-job": job_id})
                assert caught.value.body["code"] == "job_not_found"
            assert await mock.requests() == TASKS
            # the control: the same client without a job is admitted
            await clients[0].completions.create(model="small-chat", prompt="go", max_tokens=OUTPUT)
            assert await mock.requests() == TASKS + 1
            for client in clients:
                await client.close()
            await gw.settled()
