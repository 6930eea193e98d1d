"""Responses, usage and counters of the mock upstream, steered and not."""

from __future__ import annotations

import base64
import struct

import openai
import pytest
from tests.mock._mock_helpers import chat, sse_events

pytestmark = pytest.mark.usefixtures("sdk_clients_closed")   # tests/conftest.py


async def test_chat_non_stream_usage_and_counters(mock):
    resp = await mock.client.post("/v1/chat/completions", json=chat(max_tokens=5))
    assert resp.status_code == 200
    body = resp.json()
    assert body["object"] == "chat.completion"
    assert body["model"] == "small-chat"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "tok " * 5}
    assert body["choices"][0]["finish_reason"] == "length"
    # 3 words + 4 per message
    assert body["usage"] == {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12}
    stats = await mock.stats()
    assert stats["requests"] == 1
    assert stats["tokens_generated"] == 5
    assert stats["by_path"] == {"/v1/chat/completions": 1}
    assert stats["active_streams"] == 0 and stats["cancelled"] == 0 and stats["held"] == 0


async def test_output_length_rules(mock):
    async def completion_tokens(headers=None, **extra):
        resp = await mock.client.post("/v1/chat/completions", json=chat(**extra), headers=headers)
        choice = resp.json()["choices"][0]
        return resp.json()["usage"]["completion_tokens"], choice["finish_reason"]

    assert await completion_tokens() == (16, "stop")
    assert await completion_tokens(max_completion_tokens=3) == (3, "length")
    assert await completion_tokens({"x-mock-tokens": "7"}) == (7, "stop")
    assert await completion_tokens({"x-mock-tokens": "7"}, max_tokens=100) == (7, "stop")
    assert await completion_tokens({"x-mock-tokens": "70"}, max_tokens=10) == (10, "length")


async def test_chat_parts_and_n_choices(mock):
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "one two"}, {"type": "image_url"}]},
    ]
    resp = await mock.client.post(
        "/v1/chat/completions", json={"model": "any-name", "messages": messages, "n": 3, "max_tokens": 2}
    )
    body = resp.json()
    assert body["model"] == "any-name"
    assert [c["index"] for c in body["choices"]] == [0, 1, 2]
    assert body["usage"] == {"prompt_tokens": 12, "completion_tokens": 6, "total_tokens": 18}
    assert (await mock.stats())["tokens_generated"] == 6


async def test_completions_list_prompt(mock):
    resp = await mock.client.post(
        "/v1/completions", json={"model": "m", "prompt": ["a b c", [1, 2]], "n": 2, "max_tokens": 4}
    )
    body = resp.json()
    assert body["object"] == "text_completion"
    assert len(body["choices"]) == 4
    assert body["choices"][3] == {"index": 3, "text": "tok " * 4, "logprobs": None, "finish_reason": "length"}
    assert body["usage"] == {"prompt_tokens": 5, "completion_tokens": 16, "total_tokens": 21}


async def test_completions_stream(mock):
    body = {"model": "m", "prompt": "hi", "max_tokens": 2, "stream": True}
    resp = await mock.client.post("/v1/completions", json=body)
    events = sse_events(resp.text)
    assert events[-1] == "[DONE]"
    assert [e["choices"][0]["text"] for e in events[:-1]] == ["tok ", "tok ", ""]
    assert events[-2]["choices"][0]["finish_reason"] == "length"
    assert all(e["object"] == "text_completion" and "usage" not in e for e in events[:-1])


async def test_embeddings_and_models(mock):
    resp = await mock.client.post("/v1/embeddings", json={"model": "emb", "input": ["a b", "c"]})
    body = resp.json()
    assert [len(d["embedding"]) for d in body["data"]] == [8, 8]
    assert body["usage"] == {"prompt_tokens": 3, "total_tokens": 3}
    resp = await mock.client.post(
        "/v1/embeddings", json={"model": "emb", "input": "a b", "encoding_format": "base64"}
    )
    vec = struct.unpack("<8f", base64.b64decode(resp.json()["data"][0]["embedding"]))
    assert vec[0] == pytest.approx(body["data"][0]["embedding"][0], abs=1e-6)
    models = (await mock.client.get("/v1/models")).json()
    assert models["object"] == "list"
    assert {"small-chat", "large-chat", "mock-model"} <= {m["id"] for m in models["data"]}
    assert all(m["owned_by"] == "mock" and m["object"] == "model" for m in models["data"])


async def test_stream_usage_chunk_only_when_asked(mock):
    plain = sse_events((await mock.client.post("/v1/chat/completions", json=chat(max_tokens=3, stream=True))).text)
    assert plain[-1] == "[DONE]"
    chunks = plain[:-1]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [c["choices"][0]["delta"] for c in chunks[1:4]] == [{"content": "tok "}] * 3
    assert chunks[4]["choices"][0]["finish_reason"] == "length"
    assert len(chunks) == 5 and all("usage" not in c for c in chunks)
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)

    asked = chat(max_tokens=3, stream=True, stream_options={"include_usage": True})
    events = sse_events((await mock.client.post("/v1/chat/completions", json=asked)).text)
    usage = events[-2]
    assert usage["choices"] == []
    assert usage["usage"] == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    assert all("usage" not in c for c in events[:-2])

    headers = {"x-mock-no-usage": "1"}
    events = sse_events((await mock.client.post("/v1/chat/completions", json=asked, headers=headers)).text)
    assert all("usage" not in c for c in events[:-1])
    assert (await mock.stats())["tokens_generated"] == 9


async def test_error_status_steering(mock):
    for status, kind in ((500, "server_error"), (503, "server_error"), (429, "rate_limit_error")):
        resp = await mock.client.post(
            "/v1/chat/completions", json=chat(), headers={"x-mock-status": str(status), "x-mock-retry-after": "3"}
        )
        assert resp.status_code == status
        error = resp.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}
        assert error["type"] == kind and error["param"] is None
        assert resp.headers["retry-after"] == "3"
    stats = await mock.stats()
    assert stats["requests"] == 3 and stats["tokens_generated"] == 0


async def test_bad_input_and_unknown_routes(mock):
    resp = await mock.client.post("/v1/chat/completions", content=b"{not json")
    assert resp.status_code == 400
    assert resp.json()["error"]["type"] == "invalid_request_error"
    resp = await mock.client.post("/v1/chat/completions", json=chat(), headers={"x-mock-tokens": "many"})
    assert resp.status_code == 400 and "x-mock-tokens" in resp.json()["error"]["message"]
    resp = await mock.client.post("/v1/chat/completions", json={"model": "m", "messages": "hi"})
    assert resp.status_code == 400
    for method, path in (("GET", "/nowhere"), ("GET", "/v1/chat/completions"), ("POST", "/v1/models")):
        resp = await mock.client.request(method, path)
        assert resp.status_code == 404 and "error" in resp.json()


async def test_last_request_and_reset(mock):
    await mock.client.post(
        "/v1/chat/completions",
        json=chat(stream_options={"include_usage": True}),
        headers={"X-Custom": "Yes", "x-mock-tokens": "1"},
    )
    last = (await mock.stats())["last_request"]
    assert last["path"] == "/v1/chat/completions"
    assert last["headers"]["x-custom"] == "Yes"
    assert "authorization" not in last["headers"]
    assert last["body"]["stream_options"] == {"include_usage": True}
    assert (await mock.client.post("/_mock/reset")).status_code == 200
    stats = await mock.stats()
    assert (stats["requests"], stats["tokens_generated"], stats["by_path"]) == (0, 0, {})
    assert stats["last_request"] is None


async def test_openai_sdk(mock):
    client = openai.AsyncOpenAI(base_url=f"{mock.base_url}/v1", api_key="x", max_retries=0)
    try:
        done = await client.chat.completions.create(
            model="small-chat", messages=[{"role": "user", "content": "hi"}], max_tokens=4
        )
        assert done.choices[0].message.content == "tok " * 4
        assert done.usage.completion_tokens == 4
        stream = await client.chat.completions.create(
            model="large-chat",
            messages=[{"role": "user", "content": "hi"}],
            max_tokens=3,
            stream=True,
            stream_options={"include_usage": True},
        )
        text, usage = "", None
        async for chunk in stream:
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
            if chunk.usage is not None:
                usage = chunk.usage
        assert text == "tok " * 3
        assert usage is not None and usage.completion_tokens == 3 and usage.prompt_tokens == 5
        emb = await client.embeddings.create(model="emb", input="hello")
        assert len(emb.data[0].embedding) == 8
    finally:
        await client.close()
    assert (await mock.stats())["last_request"]["headers"]["authorization"] == "Bearer x"
