"""``detector: http`` through the gateway: the official ``openai`` SDK against the gateway, the
mock backend behind it, and the classification service in its own process
(tests/screening/classify_server.py). A service slower than the policy's budget fails
closed (503 ``screening_unavailable``) or open, as the policy says; an attack it sees is
refused before the backend; a control request gets through."""

from __future__ import annotations

import openai
import pytest
import yaml

from tests.screening.test_remote import service  # noqa: F401  (the module-scoped service fixture)
from tests.support import gateway_in_process, mock_backend

pytestmark = pytest.mark.usefixtures("sdk_clients_closed")


def config(mock_url: str, service_url: str, tmp_path) -> str:
    http = {"url": service_url + "/classify", "model": "prompt-guard", "batch_window_ms": 1}
    policies = {
        "closed": {"injection": {"detector": "http", "http": http, "timeout_ms": 100}},
        "open": {"injection": {"detector": "http", "http": http, "timeout_ms": 100, "on_failure": "open"}},
        "both": {"injection": {"detectors": ["heuristic", "http"], "combine": "max", "http": http,
                               "timeout_ms": 1000}},
    }
    plan = {"models": ["small-chat"], "max_output_tokens": 512}
    raw = {
        "upstreams": {"mock": {"base_url": mock_url, "read_timeout_s": 10}},
        "models": {"small-chat": {"upstream": "mock", "context_window": 32768}},
        "screening": {"policies": policies},
        "plans": {name: {**plan, "screening": name} for name in policies},
        "tenants": {name: {"plan": name} for name in policies},
        "keystore": {"url": f"sqlite:///{tmp_path}/keys.db"},
        "logging": {"decisions": str(tmp_path / "decisions.jsonl")},
    }
    return yaml.safe_dump(raw)


@pytest.fixture
async def setup(service, tmp_path):  # noqa: F811
    async with mock_backend() as mock:
        async with gateway_in_process(config(mock.url, service, tmp_path), tmp_path / "decisions.jsonl") as gw:
            keys = {name: await gw.new_key(name) for name in ("closed", "open", "both")}
            yield gw, mock, keys


def said(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


async def ask(gw, key: str, text: str):
    sdk = openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key=key, max_retries=0)
    return await sdk.chat.completions.with_raw_response.create(model="small-chat", max_tokens=16, messages=said(text))


async def test_a_slow_service_fails_closed_and_open_as_the_policy_says(setup):
    gw, mock, keys = setup
    control = await ask(gw, keys["closed"], "What is the capital of France?")
    assert control.http_response.status_code == 200
    before = await mock.requests()
    with pytest.raises(openai.APIStatusError) as caught:
        await ask(gw, keys["closed"], "SLOW: what is the capital of Spain?")
    assert caught.value.status_code == 503 and caught.value.code == "screening_unavailable"
    assert caught.value.response.headers["x-tokenward-reason"] == "screening_unavailable"
    assert await mock.requests() == before
    assert gw.decisions()[-1]["screening"]["injection"] == {"detector": "http", "outcome": "unavailable",
                                                            "failure": "timeout"}
    reply = await ask(gw, keys["open"], "SLOW: what is the capital of Italy?")
    assert reply.http_response.status_code == 200 and await mock.requests() == before + 1
    assert gw.decisions()[-1]["screening"]["injection"]["outcome"] == "failed_open"


async def test_an_attack_the_service_sees_is_refused_before_the_backend(setup):
    gw, mock, keys = setup
    assert (await ask(gw, keys["both"], "Summarise the plan we agreed.")).http_response.status_code == 200
    before = await mock.requests()
    with pytest.raises(openai.APIStatusError) as caught:
        await ask(gw, keys["both"], "xyzzy: the plan we agreed")          # only the service sees it
    assert caught.value.status_code == 400 and caught.value.code == "content_blocked"
    assert caught.value.response.headers["x-tokenward-reason"] == "content_blocked"
    assert await mock.requests() == before
    assert gw.decisions()[-1]["screening"]["injection"]["detector"] == "heuristic+http"
