"""Model aliases through a gateway: ``models.NAME.aliases`` serve other names as NAME.

The plan's entitlement and the key's scope are checked on NAME, the backend receives
NAME's backend name, the decision record says NAME (and the pattern that matched), and the
answer carries the name the client asked for, whole and streamed, on chat completions and
on the agents' own APIs."""

from __future__ import annotations

import json

import anthropic
import httpx
import openai
import pytest
import yaml

from tests.support import gateway_in_process, mock_backend

ASKED = "claude-opus-4-8"


def _config(mock_url: str, tmp_path, dialects: tuple[str, ...] = ("chat",)) -> str:
    raw = {
        "server": {"expose_metrics": True},
        "upstreams": {"mock": {"base_url": mock_url, "forward_headers": ["x-mock-*"], "read_timeout_s": 10,
                               "dialects": list(dialects)}},
        "models": {
            "small-chat": {"upstream": "mock", "aliases": ["gpt-5*"], "serves": ["chat", "completions", "embeddings"]},
            "large-chat": {"upstream": "mock", "upstream_model": "big-backend-model",
                           "aliases": ["claude-*", "big"]},
            "claude-exact": {"upstream": "mock"},   # an exact name wins over large-chat's claude-*
        },
        "plans": {"team": {"models": ["small-chat", "large-chat", "claude-exact"], "max_output_tokens": 256},
                  "free": {"models": ["small-chat"], "max_output_tokens": 256}},
        "tenants": {"acme": {"plan": "team"}, "globex": {"plan": "free"}},
        "keystore": {"url": f"sqlite:///{tmp_path}/keys.db"},
        "logging": {"decisions": str(tmp_path / "decisions.jsonl")},
    }
    return yaml.safe_dump(raw, sort_keys=False)


@pytest.fixture
async def env(tmp_path):
    async with mock_backend() as backend:
        async with gateway_in_process(_config(backend.url, tmp_path), tmp_path / "decisions.jsonl") as gw:
            yield backend, gw


def _chat(model: str, **extra):
    return {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, **extra}


def _events(text: str) -> list[dict]:
    return [json.loads(line[6:]) for line in text.splitlines()
            if line.startswith("data: ") and line != "data: [DONE]"]


async def test_an_alias_is_served_as_its_model_and_answered_in_the_asked_name(env):
    backend, gw = env
    async with gw.client() as client:
        reply = await client.post(gw.url + "/v1/chat/completions", json=_chat(ASKED))
    assert reply.status_code == 200
    assert reply.json()["model"] == ASKED
    assert (await backend.last_body())["model"] == "big-backend-model"
    record = gw.decisions()[-1]
    assert record["model"] == "large-chat" and record["notes"]["model_alias"] == "claude-*"
    async with gw.client() as client:
        metrics = (await client.get(gw.url + "/metrics")).text
    assert "tokenward_decisions_total" in metrics and ASKED not in metrics   # a label never carries the asked name


@pytest.mark.parametrize("usage", [False, True])
async def test_every_streamed_chunk_carries_the_asked_name(env, usage):
    _, gw = env
    extra = {"stream": True, **({"stream_options": {"include_usage": True}} if usage else {})}
    async with gw.client() as client:
        reply = await client.post(gw.url + "/v1/chat/completions", json=_chat("gpt-5.1-codex", **extra))
    chunks = _events(reply.text)
    assert chunks and {c["model"] for c in chunks} == {"gpt-5.1-codex"}
    assert reply.text.rstrip().endswith("data: [DONE]")
    assert bool(chunks[-1].get("usage")) is usage


async def test_a_usage_chunk_the_gateway_writes_names_the_asked_model_too(env):
    """A backend that reports no usage: the gateway writes the usage chunk itself, at the
    stream's end (not through the transforms' events): it carries the asked name as well."""
    _, gw = env
    body = _chat("gpt-5-mini", stream=True, stream_options={"include_usage": True})
    async with gw.client() as client:
        reply = await client.post(gw.url + "/v1/chat/completions", json=body, headers={"x-mock-no-usage": "1"})
    chunks = _events(reply.text)
    assert chunks[-1]["usage"] and chunks[-1]["choices"] == []
    assert {c["model"] for c in chunks} == {"gpt-5-mini"}
    assert gw.decisions()[-1]["usage"]["source"] != "reported"   # the gateway's own count


async def test_completions_and_embeddings_by_alias(env):
    _, gw = env
    async with gw.client() as client:
        done = await client.post(gw.url + "/v1/completions", json={"model": "gpt-5", "prompt": "hi", "max_tokens": 3})
        vectors = await client.post(gw.url + "/v1/embeddings", json={"model": "gpt-5", "input": "hi"})
    assert done.status_code == 200 and done.json()["model"] == "gpt-5"
    assert vectors.status_code == 200 and vectors.json()["model"] == "gpt-5"


async def test_an_exact_model_name_wins_over_a_matching_alias(env):
    backend, gw = env
    async with gw.client() as client:
        reply = await client.post(gw.url + "/v1/chat/completions", json=_chat("claude-exact"))
    assert reply.status_code == 200 and reply.json()["model"] == "claude-exact"
    assert (await backend.last_body())["model"] == "claude-exact"
    assert "model_alias" not in (gw.decisions()[-1].get("notes") or {})


async def test_entitlement_and_key_scope_are_checked_on_the_model_name(env):
    backend, gw = env
    free = await gw.new_key("globex")
    scoped = await gw.new_key("acme", models=["small-chat"])
    before = await backend.requests()
    for key, reason, status in ((free, "model_not_entitled", 403), (scoped, "key_scope_denied", 403)):
        async with httpx.AsyncClient(headers={"authorization": f"Bearer {key}"}, timeout=10) as client:
            refused = await client.post(gw.url + "/v1/chat/completions", json=_chat(ASKED))
            allowed = await client.post(gw.url + "/v1/chat/completions", json=_chat("gpt-5"))
        assert (refused.status_code, refused.headers["x-tokenward-reason"]) == (status, reason)
        assert refused.json()["error"]["param"] == "model" and "large-chat" in refused.json()["error"]["message"]
        assert allowed.status_code == 200 and allowed.json()["model"] == "gpt-5"
    assert await backend.requests() == before + 2   # the two controls; no refused request got through


async def test_a_name_no_alias_matches_is_unknown(env):
    backend, gw = env
    before = await backend.requests()
    async with gw.client() as client:
        reply = await client.post(gw.url + "/v1/chat/completions", json=_chat("llama-3"))
    assert (reply.status_code, reply.headers["x-tokenward-reason"]) == (404, "unknown_model")
    assert await backend.requests() == before


async def test_the_model_list_shows_literal_aliases_of_entitled_models_only(env):
    _, gw = env
    async with gw.client() as client:
        team = [m["id"] for m in (await client.get(gw.url + "/v1/models")).json()["data"]]
    free_key = await gw.new_key("globex")
    async with httpx.AsyncClient(headers={"authorization": f"Bearer {free_key}"}, timeout=10) as client:
        free = [m["id"] for m in (await client.get(gw.url + "/v1/models")).json()["data"]]
    assert team == ["small-chat", "large-chat", "big", "claude-exact"]   # patterns are not names
    assert free == ["small-chat"]


@pytest.mark.parametrize("stream", [False, True])
async def test_messages_and_responses_answers_carry_the_asked_name(env, stream):
    _, gw = env
    async with anthropic.AsyncAnthropic(base_url=gw.url, api_key=gw.key, max_retries=0) as sdk:
        if stream:
            async with sdk.messages.stream(model=ASKED, max_tokens=8, messages=[{"role": "user", "content": "hi"}]
                                           ) as events:
                message = await events.get_final_message()
        else:
            message = await sdk.messages.create(model=ASKED, max_tokens=8, messages=[{"role": "user", "content": "hi"}])
    assert message.model == ASKED
    sdk_openai = openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key=gw.key, max_retries=0)
    try:
        if stream:
            seen = [e async for e in await sdk_openai.responses.create(model="gpt-5", input="hi",
                                                                       max_output_tokens=16, stream=True)]
            models = {e.response.model for e in seen if hasattr(e, "response")}
        else:
            models = {(await sdk_openai.responses.create(model="gpt-5", input="hi", max_output_tokens=16)).model}
    finally:
        await sdk_openai.close()
    assert models == {"gpt-5"}


@pytest.mark.parametrize("stream", [False, True])
async def test_a_native_upstream_receives_the_models_backend_name(tmp_path, stream):
    """Forwarded as the client sent it (the upstream serves Messages itself), but for the
    model: NAME's backend name; the answer carries the asked name again."""
    async with mock_backend() as backend:
        config = _config(backend.url, tmp_path, ("chat", "messages", "responses"))
        async with gateway_in_process(config, tmp_path / "decisions.jsonl") as gw:
            body = {"model": ASKED, "max_tokens": 8, "stream": stream, "messages": [{"role": "user", "content": "hi"}]}
            async with httpx.AsyncClient(timeout=10) as client:
                reply = await client.post(gw.url + "/v1/messages", json=body,
                                          headers={"x-api-key": gw.key, "anthropic-version": "2023-06-01"})
            assert reply.status_code == 200
            sent = await backend.last_body()
            assert sent["model"] == "big-backend-model" and sent["messages"] == body["messages"]
            assert (await backend.stats())["last_request"]["path"] == "/v1/messages"   # native, not translated
            if stream:
                start = next(e for e in _events(reply.text) if e["type"] == "message_start")
                assert start["message"]["model"] == ASKED
            else:
                assert reply.json()["model"] == ASKED
            assert gw.decisions()[-1]["notes"]["dialect"] == "messages"
