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

pytestmark = pytest.mark.usefixtures("sdk_clients_closed")   # tests/conftest.py

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


async def test_four_child_jobs_carve_from_the_parent_and_minting_new_jobs_stays_bounded(tmp_path, redis_server):
    """The same fan-out with the four tasks as child jobs: each carves 25 of the parent's
    100 at creation, so its second attempt (22 more) is refused terminally and no fifth
    child fits; the parent's tree never reserves more than 100. A client that then mints
    fresh jobs to carry on is bounded by the plan: jobs_per_minute x max_job_tokens."""
    plan = {**PLAN, "max_job_tokens": BUDGET, "jobs_per_minute": 8, "max_open_jobs": 16}
    async with backend() as mock:
        path = budget_config(tmp_path, mock.port, redis_server.url, plans={"team": plan})
        async with in_process(path) as gw:
            key = await gw.new_key()
            ns = tenant_namespace("tw", "acme")
            parent = (await gw.client.post("/v1/jobs", json={"budget_tokens": BUDGET, "max_children": TASKS},
                                           headers=key)).json()["id"]
            made = await asyncio.gather(*(gw.client.post("/v1/jobs", json={"budget_tokens": BUDGET // TASKS,
                                                                           "parent": parent}, headers=key)
                                          for _ in range(TASKS)))
            assert [r.status_code for r in made] == [201] * TASKS
            children = [r.json()["id"] for r in made]
            fifth = await gw.client.post("/v1/jobs", json={"budget_tokens": 1, "parent": parent}, headers=key)
            assert fifth.status_code == 429 and fifth.json()["error"]["code"] == "job_budget_exhausted"
            client = openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key=key["authorization"][7:])
            peaks = {"used": 0, "held": 0}
            stop = asyncio.Event()
            watcher = asyncio.ensure_future(watch_job(gw.store, ns, parent, peaks, stop))

            async def task(job: str) -> list[str]:
                outcome = []
                for _ in range(ATTEMPTS):
                    try:
                        await client.completions.create(model="small-chat", prompt="go", max_tokens=OUTPUT,
                                                        extra_headers={"x-tokenward-job": job,
                                                                       "x-mock-tokens": str(OUTPUT)})
                        outcome.append("ran")
                    except openai.RateLimitError as exc:
                        assert exc.response.headers["x-should-retry"] == "false"
                        outcome.append(exc.body["code"])
                        break
                return outcome

            outcomes = await asyncio.gather(*(task(job) for job in children))
            stop.set()
            await watcher
            assert outcomes == [["ran", "job_budget_exhausted"]] * TASKS
            assert await mock.requests() == TASKS
            assert peaks["used"] == BUDGET                  # all of it carved, never more
            records = await gw.wait_decisions(TASKS * 2 + TASKS + 2)
            assert len([r for r in records if r.get("reason") == "job_budget_exhausted"
                        and r.get("decided_by") == "admission"]) == TASKS   # no SDK retry
            for job in children:
                view = (await gw.client.get(f"/v1/jobs/{job}", headers=key)).json()
                assert view["state"] == "exhausted" and view["spent_tokens"] == 21 and view["reserved_tokens"] == 0

            # minting: each fresh job is bounded by max_job_tokens, and fresh jobs by
            # jobs_per_minute (the parent and its four children used 5 of the 8)
            admitted_tokens, minted, refusal = 0, 0, None
            for _ in range(20):
                fresh = await gw.client.post("/v1/jobs", json={"budget_tokens": BUDGET}, headers=key)
                if fresh.status_code != 201:
                    refusal = fresh
                    break
                minted += 1
                for _ in range(ATTEMPTS * 2):
                    try:
                        response = await client.completions.create(
                            model="small-chat", prompt="go", max_tokens=OUTPUT,
                            extra_headers={"x-tokenward-job": fresh.json()["id"], "x-mock-tokens": str(OUTPUT)})
                        admitted_tokens += response.usage.total_tokens
                    except openai.RateLimitError:
                        break
            assert minted == 3 and admitted_tokens <= minted * BUDGET
            assert refusal.status_code == 429 and refusal.json()["error"]["code"] == "rate_limited"
            assert int(refusal.headers["retry-after"]) >= 1
            assert await mock.requests() == TASKS + minted * 4   # four 22-token attempts fit in each 100
            await client.close()
            await gw.settled()
