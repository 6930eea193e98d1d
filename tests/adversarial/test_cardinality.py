"""Bounded cardinality: a request's path becomes its route template in every metric label
and decision record (observe/routes.py), so thousands of distinct paths, addresses among
them, add no series, grow no scrape, and leave no path text behind."""

from __future__ import annotations

import asyncio
import random
import string

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.budget.gateway_helpers import backend, budget_config, chat, in_process

ALLOWED_ROUTES = {"other", "/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/models",
                  "/v1/responses", "/v1/messages", "/v1/messages/count_tokens", "/v1/jobs", "/v1/jobs/{id}"}


# what a path that matches no route (or a job id that names no job) may be answered
REFUSALS = {"route_denied", "method_not_allowed", "missing_credentials", "invalid_credentials", "job_not_found",
            "unsupported_media_type"}


def _series(text: str) -> set[tuple]:
    return {(s.name, tuple(sorted(s.labels.items())))
            for family in text_string_to_metric_families(text) for s in family.samples}


def _path(rng: random.Random, i: int) -> tuple[str, str]:
    """A distinct path and the marker text it carries (what must appear nowhere)."""
    marker = "".join(rng.choices(string.ascii_lowercase, k=10)) + str(i)
    shapes = (f"/v1/{marker}", f"/v1/path.{marker}@secretmail.org/x", f"/{marker}/../etc",
              f"/v1/chat/completions/{marker}", f"/v1/jobs/{marker}/x", f"/admin%2f{marker}",
              f"/v1/models{marker}", f"/v1/jobs/{marker}@secretmail.org")
    return shapes[i % len(shapes)], marker


@pytest.fixture
async def gw(tmp_path):
    async with backend() as mock:
        path = budget_config(tmp_path, mock.port, server={"expose_metrics": True}, tpm=1_000_000)
        async with in_process(path) as running:
            running.mock = mock
            yield running


async def _hit(gw, paths: list[str], headers: dict) -> None:
    queue = list(paths)

    async def worker(n: int) -> None:
        while queue:
            path = queue.pop()
            method = ("GET", "POST", "DELETE")[len(queue) % 3]
            r = await gw.client.request(method, path, json=chat(max_tokens=5) if method == "POST" else None,
                                        headers=headers if n % 2 else {})
            assert r.status_code in (400, 401, 404, 405, 415), (path, r.status_code, r.text)
            code = r.json()["error"]["code"]
            assert code in REFUSALS, (path, r.text)
            assert r.headers.get("x-tokenward-reason", code) == code

    await asyncio.gather(*(worker(n) for n in range(16)))


async def test_distinct_paths_add_no_series_and_leave_no_text(gw):
    rng = random.Random(27)
    key = await gw.new_key()
    assert (await gw.client.post("/v1/chat/completions", json=chat(max_tokens=5), headers=key)).status_code == 200
    before_work = await gw.mock.requests()
    first = [_path(rng, i) for i in range(700)]
    await _hit(gw, [p for p, _ in first], key)
    scrape_1 = (await gw.client.get("/metrics")).text
    second = [_path(rng, i) for i in range(700, 3500)]
    await _hit(gw, [p for p, _ in second], key)
    scrape_2 = (await gw.client.get("/metrics")).text
    assert await gw.mock.requests() == before_work       # none of them reached the backend

    # bounded: four times the paths added no series at all, and the scrape did not grow
    assert _series(scrape_2) == _series(scrape_1)
    assert abs(len(scrape_2) - len(scrape_1)) < 2_000
    routes = {s.labels["route"] for f in text_string_to_metric_families(scrape_2)
              for s in f.samples if "route" in s.labels}
    assert "other" in routes and routes <= ALLOWED_ROUTES, routes

    # every path but /admin%2f... (decoded to /admin/..., the admin API's: it keeps no record)
    records = await gw.wait_decisions(1 + sum(not p.startswith("/admin") for p, _ in first + second))
    raw = gw.decisions_path.read_text()
    for _, marker in first + second:
        assert marker not in scrape_2 and marker not in raw, marker
    assert "secretmail" not in raw and "secretmail" not in scrape_2
    assert {r["route"] for r in records} <= ALLOWED_ROUTES
    other = [r for r in records if r["route"] == "other"]
    assert other and all(len(r["path_shape"]) <= 48 and not set(r["path_shape"]) - set("a9/._~@%+=-?")
                         for r in other)
    assert "/a9/a.a9@a.a/a" in {r["path_shape"] for r in other}      # the email-like probe, as a shape
    jobs = [r for r in records if r["route"] == "/v1/jobs/{id}"]
    assert all("path_shape" not in r for r in jobs)
