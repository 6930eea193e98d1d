"""A backend written to lie, over loopback (tests/upstream/lying_backend.py), against a real
gateway with a real budget store (memory, and a private redis-server): whatever usage it
reports, whatever it sends, a tenant's budget moves by at most the request's reservation,
no counter goes negative, an answer is no larger than the request could justify, a broken
event never reaches the client, and a client never learns the backend's address.
"""

from __future__ import annotations

import contextlib
import re
import socket
from pathlib import Path
from typing import AsyncIterator

import httpx
import orjson
import pytest

from tests.budget.conftest import FakeClock
from tests.budget.gateway_helpers import budget_config, in_process
from tests.fixtures.redis_server import redis_server, redis_server_session  # noqa: F401
from tests.support import base_config, chat, gateway_in_process
from tests.upstream.lying_backend import Stream, Whole, chunk, completion, endless, lying_backend, usage
from tokenward.budget import policy
from tokenward.budget.limits import Budgets
from tokenward.config.loader import effective_plan, parse_config

MAX_TOKENS = 50
TERA = 10**12
MINUS = -3_000_000
_FINISHED = chunk(finish="stop")


def _repeated(first: dict, last: dict) -> bytes:
    """A body whose ``usage`` member appears twice."""
    return completion(first, extra=b',"usage":' + orjson.dumps(last))


# What the backend answers to the request under test. The honest requests before it answer
# within bounds, so the tenant has spent more than one reservation when the lie arrives.
LIES = {
    "negative-completion": lambda: Whole(completion(usage(5, MINUS))),
    "negative-prompt": lambda: Whole(completion(usage(MINUS, 5))),
    "zero": lambda: Whole(completion(usage(0, 0))),
    "huge-completion": lambda: Whole(completion(usage(5, TERA))),
    "huge-prompt": lambda: Whole(completion(usage(TERA, TERA))),
    "missing": lambda: Whole(completion(with_usage=False)),
    "repeated": lambda: Whole(_repeated(usage(5, MINUS), usage(TERA, TERA))),
    "stream-final-chunk": lambda: Stream([chunk("hi"), _FINISHED, chunk(usage=usage(5, MINUS), choices=False),
                                          b"data: [DONE]\n\n"]),
    "stream-missing": lambda: Stream([chunk("hi"), _FINISHED, b"data: [DONE]\n\n"]),   # counted by the gateway
    "stream-repeated": lambda: Stream([chunk("hi", usage=usage(TERA, TERA)), _FINISHED,
                                       chunk(usage=usage(MINUS, MINUS), choices=False), b"data: [DONE]\n\n"]),
}
OUT_OF_BOUNDS = {"negative-completion", "negative-prompt", "huge-completion", "huge-prompt", "repeated",
                 "stream-final-chunk", "stream-repeated"}


def _config(tmp_path: Path, port: int, store_url: str) -> Path:
    return budget_config(tmp_path, port, store_url, tpm=100_000, max_output=1000, server={"expose_metrics": True},
                         plans={"team": {"models": ["small-chat"], "max_output_tokens": 1000,
                                         "tokens_per_minute": 100_000, "requests_per_minute": 100_000,
                                         "max_concurrent_streams": 100, "monthly_spend_usd": 10.0, "max_n": 4}})


async def _budget(gw, cfg, now_ms: int) -> dict[str, int]:
    """What ``tokenward budget show`` prints for acme, read from the gateway's store:
    tokens available per rate limit, micro-USD spent per period."""
    budget = Budgets(cfg).tenant("acme", effective_plan(cfg, "acme"), None, now_ms)
    out = {}
    for name, check in zip(budget.names, budget.layout.checks):
        value = await gw.store.value(check.key)
        if check.kind in (policy.BUCKET, policy.SOFT):
            out[name] = policy.refill(value, check.p1, check.p2, now_ms)[0] // policy.SCALE
        elif check.kind == policy.SPEND:
            out[name] = value or 0
    return out


def _metric(text: str, name: str) -> list[tuple[str, float]]:
    return [(m.group(1), float(m.group(2))) for m in re.finditer(rf"^{name}(\{{[^}}]*\}})? (\S+)$", text, re.M)]


async def _post(gw, headers, lie_stream: bool) -> httpx.Response:
    body = chat(max_tokens=MAX_TOKENS, stream=lie_stream)
    return await gw.client.post("/v1/chat/completions", json=body, headers=headers)


@contextlib.asynccontextmanager
async def _gateway(tmp_path: Path, store_url: str) -> AsyncIterator[tuple]:
    async with lying_backend() as backend:
        path = _config(tmp_path, backend.port, store_url)
        clock = FakeClock()     # frozen: no bucket refills between two reads
        async with in_process(path, clock=clock) as gw:
            yield gw, backend, parse_config(path.read_text(), environ={}), clock


@pytest.mark.parametrize("lie", sorted(LIES))
@pytest.mark.parametrize("store_kind", ["memory", "redis"])
async def test_a_lying_usage_report_moves_the_budget_by_at_most_the_reservation(tmp_path, request, store_kind, lie):
    store_url = "memory" if store_kind == "memory" else request.getfixturevalue("redis_server").url
    async with _gateway(tmp_path, store_url) as (gw, backend, cfg, clock):
        headers = await gw.new_key()
        # honest answers first: three requests' worth spent, so a refund beyond one
        # reservation (or a charge beyond it) would show
        honest = lambda body: Whole(completion(usage(2, 40)))     # noqa: E731
        backend.answer = honest
        for _ in range(3):
            assert (await _post(gw, headers, False)).status_code == 200
        await gw.settled()
        before = await _budget(gw, cfg, clock.ms)
        assert before["tokens"] < 100_000 - 3 * 40 and before["spend_monthly"] > 0   # the honest ones were charged
        scrape = (await gw.client.get("/metrics")).text
        clamped_before = sum(v for _, v in _metric(scrape, "tokenward_usage_out_of_bounds_total"))

        answer = LIES[lie]
        backend.answer = lambda body: answer()
        resp = await _post(gw, headers, lie.startswith("stream"))
        assert resp.status_code == 200, resp.text
        await gw.settled()
        after = await _budget(gw, cfg, clock.ms)
        record = (await gw.wait_decisions(4))[-1]
        reserved, reserved_cost = record["notes"]["budget"]["reserved"], record["notes"]["budget"]["reserved_cost"]
        assert abs(after["tokens"] - before["tokens"]) <= reserved, (before, after, reserved)
        assert abs(after["spend_monthly"] - before["spend_monthly"]) <= reserved_cost, (before, after)
        assert after["tokens"] <= before["tokens"] and after["spend_monthly"] >= before["spend_monthly"]

        scrape = (await gw.client.get("/metrics")).text
        tokens = _metric(scrape, "tokenward_tokens_total")
        assert tokens and all(value >= 0 for _, value in tokens), tokens
        negative = [line for line in scrape.splitlines()        # no counter at all goes negative
                    if re.match(r"tokenward_\w+_total[{ ]", line) and float(line.rsplit(" ", 1)[1]) < 0]
        assert not negative, negative
        clamped = sum(v for _, v in _metric(scrape, "tokenward_usage_out_of_bounds_total"))
        if lie in OUT_OF_BOUNDS:
            assert "usage_out_of_bounds" in record["notes"], record
            assert clamped > clamped_before
            assert 'upstream="mock"' in scrape.split("tokenward_usage_out_of_bounds_total", 1)[1]
        else:
            assert "usage_out_of_bounds" not in record["notes"]
            assert clamped == clamped_before
        assert backend.requests == 4


def _text_completion(usage_value: dict) -> Whole:
    return Whole(orjson.dumps({"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "small-chat",
                               "choices": [{"index": i, "text": "x", "finish_reason": "stop"} for i in range(4)],
                               "usage": usage_value}))


async def test_the_output_bound_counts_choices_and_prompt_list_items(tmp_path):
    # completions with a prompt list of 2 and n = 2, max_tokens 10: 40 output tokens at most
    async with _gateway(tmp_path, "memory") as (gw, backend, cfg, clock):
        headers = await gw.new_key()
        body = {"model": "small-chat", "prompt": ["first", "second"], "n": 2, "max_tokens": 10}
        for completion_tokens, clamped in ((40, False), (41, True), (-1, True)):
            backend.answer = lambda _, c=completion_tokens: _text_completion(usage(4, c))
            resp = await gw.client.post("/v1/completions", json=body, headers=headers)
            assert resp.status_code == 200, resp.text
            await gw.settled()
            record = gw.decisions()[-1]
            assert ("usage_out_of_bounds" in record["notes"]) is clamped, record
            assert record["usage"]["completion_tokens"] == min(max(completion_tokens, 0), 40)
            assert record["notes"]["budget"]["actual"] <= record["notes"]["budget"]["reserved"]


async def test_a_jobs_request_with_a_lying_backend_spends_at_most_its_reservation(tmp_path):
    async with lying_backend() as backend:
        path = budget_config(tmp_path, backend.port, "memory", plans={"team": {
            "models": ["small-chat"], "max_output_tokens": 200, "tokens_per_minute": 100_000,
            "requests_per_minute": 100_000, "max_job_tokens": 5000, "max_open_jobs": 8, "jobs_per_minute": 30}})
        async with in_process(path) as gw:
            key = await gw.new_key()
            job = (await gw.client.post("/v1/jobs", json={"budget_tokens": 1000}, headers=key)).json()
            headers = {**key, "x-tokenward-job": job["id"]}
            for lie in (usage(TERA, TERA), usage(MINUS, MINUS)):
                backend.answer = lambda _, u=lie: Whole(completion(u))
                resp = await gw.client.post("/v1/chat/completions", json=chat(max_tokens=MAX_TOKENS), headers=headers)
                assert resp.status_code == 200, resp.text
                await gw.settled()
                reserved = gw.decisions()[-1]["notes"]["budget"]["reserved"]
                state = (await gw.client.get(f"/v1/jobs/{job['id']}", headers=key)).json()
                assert 0 <= state["spent_tokens"] <= 2 * reserved and state["remaining_tokens"] >= 1000 - 2 * reserved
            # the huge report was charged its reservation, the negative one nothing
            assert state["spent_tokens"] == reserved and state["state"] == "open"


async def test_a_cached_lying_answer_never_takes_the_saved_tokens_counter_back(tmp_path):
    async with lying_backend() as backend:
        path = budget_config(tmp_path, backend.port, "memory", server={"expose_metrics": True},
                             cache={"store": "memory"},
                             plans={"team": {"models": ["small-chat"], "max_output_tokens": 200, "cache": True,
                                             "tokens_per_minute": 100_000, "requests_per_minute": 100_000}})
        async with in_process(path) as gw:
            key = await gw.new_key()
            for lie in (usage(MINUS, MINUS), usage("5", [1])):
                backend.answer = lambda _, u=lie: Whole(completion(u))
                body = chat(content=f"cached {lie['prompt_tokens']}", max_tokens=MAX_TOKENS)
                first = await gw.client.post("/v1/chat/completions", json=body, headers=key)
                assert first.status_code == 200 and first.headers["x-tokenward-cache"] == "miss"
                await gw.settled()
                hit = await gw.client.post("/v1/chat/completions", json=body, headers=key)
                assert hit.status_code == 200 and hit.headers["x-tokenward-cache"] == "hit", hit.text
            scrape = (await gw.client.get("/metrics")).text
            assert _metric(scrape, "tokenward_cache_total")        # the cache was counted
            for name in ("tokenward_cache_saved_tokens_total", "tokenward_cache_saved_usd_total",
                         "tokenward_tokens_total"):
                values = _metric(scrape, name)
                assert all(value >= 0 for _, value in values), (name, values)
            assert backend.requests == 2


def _refusal(resp: httpx.Response, status: int, code: str) -> None:
    assert resp.status_code == status, resp.text
    assert resp.json()["error"]["code"] == code
    reason = resp.headers.get("x-tokenward-reason")
    assert reason in (None, code)      # the header, where the gateway sends it


def _events(raw: bytes) -> list[bytes]:
    return [e for e in raw.split(b"\n\n") if e]


@pytest.mark.parametrize("chunked", [False, True])
async def test_an_oversized_whole_answer_is_a_502_and_settles_within_the_reservation(tmp_path, chunked):
    async with _gateway(tmp_path, "memory") as (gw, backend, cfg, clock):
        headers = await gw.new_key()
        backend.answer = lambda body: Whole(completion(usage(2, 40)))
        control = await _post(gw, headers, False)
        assert control.status_code == 200                         # the control gets through
        await gw.settled()
        before = await _budget(gw, cfg, clock.ms)
        # 50 MB for max_tokens 50: declared up front, or chunked with no length
        backend.answer = lambda body: Whole(b'{"x": "' + b"a" * 1000, length=None if chunked else 50 << 20,
                                            chunked=chunked)
        resp = await _post(gw, headers, False)
        _refusal(resp, 502, "upstream_error")
        assert len(resp.content) < 1000
        await gw.settled()
        after = await _budget(gw, cfg, clock.ms)
        record = (await gw.wait_decisions(2))[-1]
        reserved = record["notes"]["budget"]["reserved"]
        # nothing of it could be counted: charged what it reserved, never more
        assert before["tokens"] - after["tokens"] == reserved
        assert record["reason"] == "upstream_error" and "exceeds" in record["notes"]["upstream_error_detail"]
        assert backend.requests == 2 and backend.sent < 8 << 20   # the gateway hung up early


async def test_an_oversized_stream_ends_in_band_with_its_relayed_bytes_bounded(tmp_path):
    async with _gateway(tmp_path, "memory") as (gw, backend, cfg, clock):
        headers = await gw.new_key()
        backend.answer = lambda body: Stream([chunk("hi"), _FINISHED, b"data: [DONE]\n\n"])
        control = await _post(gw, headers, True)
        assert control.status_code == 200 and control.content.endswith(b"data: [DONE]\n\n")
        await gw.settled()
        before = await _budget(gw, cfg, clock.ms)
        backend.answer = lambda body: Stream(endless(chunk("x"), 50 << 20))   # 50 MB of token events
        async with gw.client.stream("POST", "/v1/chat/completions", headers=headers,
                                    json=chat(max_tokens=MAX_TOKENS, stream=True)) as resp:
            assert resp.status_code == 200
            received = b"".join([part async for part in resp.aiter_bytes()])
        limit = 8192 * MAX_TOKENS + 65536          # the default bytes per token x output bound + slack
        assert len(received) <= limit + 1024, len(received)
        events = _events(received)
        error = orjson.loads(events[-1][len(b"data: "):])
        assert error["error"]["code"] == "upstream_error" and b"[DONE]" not in received
        assert all(e == chunk("x")[:-2] for e in events[:-1])       # only whole events, as sent
        await gw.settled()
        after = await _budget(gw, cfg, clock.ms)
        record = (await gw.wait_decisions(2))[-1]
        reserved = record["notes"]["budget"]["reserved"]
        # settled on what was counted: the token events, clamped to the output bound
        assert record["usage"]["completion_tokens"] == MAX_TOKENS and record["usage"]["source"] == "counted"
        assert 0 < before["tokens"] - after["tokens"] <= reserved
        assert record["notes"]["usage_out_of_bounds"]["completion_tokens"]["used"] == MAX_TOKENS
        assert backend.sent < 8 << 20


BROKEN = {
    "framing": b"this line is not server-sent events 127.0.0.1:9100\n\n",
    "json": b'data: {"choices": [{"index": 0, "delta": {"content": "SECRET-PART\n\n',
    "not-utf8": b'data: {"choices": []}\n: \xff\xfe\n\n',
}


@pytest.mark.parametrize("kind", sorted(BROKEN))
async def test_a_malformed_event_ends_the_stream_and_never_reaches_the_client(tmp_path, kind):
    async with _gateway(tmp_path, "memory") as (gw, backend, cfg, clock):
        headers = await gw.new_key()
        good = [chunk("one"), chunk("two")]
        backend.answer = lambda body: Stream(good + [BROKEN[kind], chunk("three"), _FINISHED, b"data: [DONE]\n\n"])
        async with gw.client.stream("POST", "/v1/chat/completions", headers=headers,
                                    json=chat(max_tokens=MAX_TOKENS, stream=True)) as resp:
            assert resp.status_code == 200
            received = b"".join([part async for part in resp.aiter_bytes()])
        events = _events(received)
        assert events[:2] == [e[:-2] for e in good]
        assert len(events) == 3
        assert orjson.loads(events[2][len(b"data: "):])["error"]["code"] == "upstream_error"
        assert BROKEN[kind].strip() not in received and b"three" not in received and b"[DONE]" not in received
        for secret in (b"SECRET", b"9100", b"\xff"):
            assert secret not in received
        await gw.settled()
        record = (await gw.wait_decisions(1))[-1]
        assert record["reason"] == "upstream_error" and record["usage"]["completion_tokens"] == 2
        # the first event malformed: nothing was sent yet, so a plain 502
        backend.answer = lambda body: Stream([BROKEN[kind], chunk("late"), _FINISHED, b"data: [DONE]\n\n"])
        first = await _post(gw, headers, True)
        _refusal(first, 502, "upstream_error")
        assert b"late" not in first.content and b"SECRET" not in first.content


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_dead_backend_is_a_502_with_no_address_for_the_client(tmp_path, stream):
    port = _closed_port()
    decisions = tmp_path / "decisions.jsonl"
    config = base_config(f"http://127.0.0.1:{port}/v1", decisions=str(decisions))
    async with gateway_in_process(config, decisions) as gw, gw.client() as client:
        resp = await client.post(gw.url + "/v1/chat/completions", json=chat(stream=stream))
        _refusal(resp, 502, "upstream_unavailable")
        text = resp.text + "".join(f"{k}: {v}" for k, v in resp.headers.items())
        for secret in ("127.0.0.1", str(port), "Errno", "refused", "connect"):
            assert secret not in text, (secret, text)
        request_id = resp.headers["x-request-id"]
        assert request_id in resp.json()["error"]["message"]       # the id an operator looks up
        [record] = [r for r in gw.decisions() if r["request_id"] == request_id]
        detail = record["notes"]["upstream_error_detail"]
        assert f"127.0.0.1:{port}" in detail and "Errno" in detail
        ready = await client.get(gw.url + "/readyz")                # public too: no address there
        assert ready.status_code == 503 and str(port) not in ready.text and "127.0.0.1" not in ready.text
