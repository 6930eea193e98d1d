"""The outside personal-data set through the HTTP API (official ``openai`` SDK, the mock
backend behind the gateway): what reaches the backend in tokenize mode with the built-in
patterns, and the PII budget a policy gets when it sets no ``timeout_ms``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import openai
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.eval_sets.pii import load, score  # noqa: E402
from tests.support import gateway_in_process, mock_backend  # noqa: E402
from tokenward.pii.patterns import PatternDetector  # noqa: E402

pytestmark = pytest.mark.usefixtures("sdk_clients_closed")

POLICIES = {
    "tokenize": {"pii": {"mode": "tokenize"}},
    "slow": {"pii": {"mode": "tokenize", "detector": "python:tests.pii.slow_detectors:slow"}},
    "budgeted": {"pii": {"mode": "tokenize", "detector": "python:tests.pii.slow_detectors:slow_with_budget"}},
}
BUILT_IN = ("PHONE", "CREDIT_CARD", "STREET_ADDRESS", "EMAIL", "IBAN", "US_SSN", "IP_ADDRESS")


def config(mock_url: str) -> str:
    plan = {"models": ["small-chat"], "max_output_tokens": 512}
    raw = {
        "upstreams": {"mock": {"base_url": mock_url, "read_timeout_s": 10}},
        "models": {"small-chat": {"upstream": "mock", "context_window": 131072}},
        "screening": {"policies": POLICIES},
        "plans": {name: {**plan, "screening": name} for name in POLICIES},
        "tenants": {name: {"plan": name} for name in POLICIES},
    }
    return yaml.safe_dump(raw)


@pytest.fixture
async def gw(tmp_path):
    async with mock_backend() as backend:
        raw = yaml.safe_load(config(backend.url))
        raw["keystore"] = {"url": f"sqlite:///{tmp_path}/keys.db"}
        raw["logging"] = {"decisions": str(tmp_path / "decisions.jsonl")}
        async with gateway_in_process(yaml.safe_dump(raw), tmp_path / "decisions.jsonl") as running:
            running.extra["keys"] = {name: await running.new_key(name) for name in POLICIES}
            running.extra["mock"] = backend
            yield running


def client(gw, tenant: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key=gw.extra["keys"][tenant], max_retries=0)


async def test_planted_values_reaching_the_backend_in_tokenize_mode(gw) -> None:
    rows = [r for r in load("test") if not r["lookalike"] and any(e["type"] in BUILT_IN for e in r["entities"])]
    rows = rows[:60]
    lookalikes = [r["text"] for r in load("test") if r["lookalike"]][:20]
    messages = [{"role": "user", "content": r["text"]} for r in rows] + \
               [{"role": "user", "content": t} for t in lookalikes]
    reply = await client(gw, "tokenize").chat.completions.create(model="small-chat", max_tokens=20, messages=messages)
    assert reply.choices
    saw = (await gw.extra["mock"].stats())["last_request"]["body"]["messages"]
    assert len(saw) == len(messages)
    planted = [(e["type"], e["value"]) for r in rows for e in r["entities"] if e["type"] in BUILT_IN]
    reached = [(kind, value) for kind, value in planted if any(value in m["content"] for m in saw)]
    # the same figure as the masking function alone gives (bench/eval_sets/pii.py)
    offline = score(PatternDetector().find, rows, BUILT_IN)
    assert len(reached) == sum(offline.reached.values())
    assert len(planted) >= 60 and len(reached) <= 0.08 * len(planted), reached
    # look-alikes (versions, ISBNs, order numbers, dates) go through untouched
    assert [m["content"] for m in saw[len(rows):]] == lookalikes


async def test_a_slow_pii_detector_gets_the_stage_default_and_fails_closed(gw) -> None:
    mock = gw.extra["mock"]
    before = await mock.requests()
    with pytest.raises(openai.APIStatusError) as caught:
        await client(gw, "slow").chat.completions.create(
            model="small-chat", max_tokens=20, messages=[{"role": "user", "content": "hello"}])
    assert caught.value.status_code == 503 and caught.value.code == "screening_unavailable"
    assert await mock.requests() == before
    record = gw.decisions()[-1]["screening"]["pii"]
    assert record["outcome"] == "unavailable" and record["failure"] == "timeout"
    # control: the same 80 ms detector declaring its own 250 ms budget gets through
    reply = await client(gw, "budgeted").chat.completions.create(
        model="small-chat", max_tokens=20, messages=[{"role": "user", "content": "hello"}])
    assert reply.choices and await mock.requests() == before + 1
    assert gw.decisions()[-1]["screening"]["pii"]["outcome"] == "pass"
