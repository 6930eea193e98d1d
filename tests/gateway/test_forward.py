"""The forwarder: pass-through, usage capture, stream timeouts, backend failures, credentials."""

from __future__ import annotations

import socket

import httpx
import orjson
import pytest

from tests.support import base_config, chat, gateway_in_process


def _events(text: str) -> list:
    out = []
    for block in text.split("\n\n"):
        if block.startswith("data: "):
            data = block[6:]
            out.append(data if data == "[DONE]" else orjson.loads(data))
    return out


async def test_non_streaming_passes_through_with_reported_usage(gw, mock):
    async with gw.client() as client:
        resp = await client.post(gw.url + "/v1/chat/completions", json=chat(max_tokens=5))
    assert resp.status_code == 200
    assert resp.json()["usage"]["completion_tokens"] == 5
    assert resp.headers["content-length"] == str(len(resp.content))
    record = gw.decisions()[-1]
    assert record["usage"] == {"prompt_tokens": resp.json()["usage"]["prompt_tokens"], "completion_tokens": 5,
                               "source": "reported"}
    assert record["upstream_status"] == 200 and record["state"] == "settled"
    assert record["request_id"] == resp.headers["x-request-id"]
    assert set(record["stages_us"]) >= {"edge", "forward"}


async def test_stream_asks_backend_for_usage_and_drops_it_for_the_client(gw, mock):
    async with gw.client() as client:
        resp = await client.post(gw.url + "/v1/chat/completions", json=chat(max_tokens=4, stream=True))
    events = _events(resp.text)
    assert events[-1] == "[DONE]"
    assert all("usage" not in e for e in events[:-1])
    assert sum(1 for e in events[:-1] if e["choices"] and e["choices"][0]["delta"].get("content")) == 4
    forwarded = (await mock.stats())["last_request"]["body"]
    assert forwarded["stream_options"] == {"include_usage": True}
    record = gw.decisions()[-1]
    assert record["usage"]["completion_tokens"] == 4 and record["usage"]["source"] == "reported"


async def test_stream_keeps_usage_when_client_asked(gw, mock):
    async with gw.client() as client:
        resp = await client.post(gw.url + "/v1/chat/completions",
                                 json=chat(max_tokens=3, stream=True, stream_options={"include_usage": True}))
    usage_events = [e for e in _events(resp.text)[:-1] if e.get("usage")]
    assert len(usage_events) == 1 and usage_events[0]["usage"]["completion_tokens"] == 3


async def test_backend_without_usage_is_counted_and_marked(gw, mock):
    async with gw.client() as client:
        resp = await client.post(gw.url + "/v1/chat/completions", json=chat(max_tokens=6, stream=True),
                                 headers={"x-mock-no-usage": "1"})
    assert resp.status_code == 200
    record = gw.decisions()[-1]
    # the prompt is what the work stage counted (and what the budget charges)
    assert record["usage"] == {"prompt_tokens": record["notes"]["budget"]["estimated_input"], "completion_tokens": 6,
                               "source": "counted"}


async def test_client_credentials_never_reach_the_backend(mock, tmp_path):
    extra = "".join([])
    config = base_config(mock.url).replace("forward_headers:", "api_key: backend-secret\n    forward_headers:")
    async with gateway_in_process(config + extra) as running:
        async with httpx.AsyncClient() as client:
            resp = await client.post(running.url + "/v1/chat/completions", json=chat(), headers={
                "x-api-key": running.key, "cookie": "s=1",
                "x-tenant-id": "globex", "x-mock-tokens": "2"})
    assert resp.status_code == 200
    seen = (await mock.stats())["last_request"]["headers"]
    assert seen["authorization"] == "Bearer backend-secret"  # the backend's key, never the client's
    assert "x-api-key" not in seen and "cookie" not in seen and "x-tenant-id" not in seen
    assert seen["x-mock-tokens"] == "2"


async def test_model_is_renamed_for_the_backend(gw, mock):
    async with gw.client() as client:
        resp = await client.post(gw.url + "/v1/chat/completions", json=chat(model="large-chat"))
    assert resp.status_code == 200
    assert (await mock.stats())["last_request"]["body"]["model"] == "big-backend-model"


async def test_a_rewritten_body_keeps_every_other_member_as_sent(gw, mock):
    """A renamed, streaming request whose client said include_usage false: the two members
    the gateway rewrites change, the rest reach the backend as the client sent them."""
    body = chat(model="large-chat", max_tokens=3, stream=True, stream_options={"include_usage": False},
                temperature=0.25, stop=["\n\n"])
    body["messages"].append({"role": "user", "content": "caf\u00e9 \"quoted\" \\ tab\t"})
    async with gw.client() as client:
        resp = await client.post(gw.url + "/v1/chat/completions", json=body)
    assert resp.status_code == 200
    assert all("usage" not in e for e in _events(resp.text)[:-1])   # the client asked for none
    forwarded = (await mock.stats())["last_request"]["body"]
    assert forwarded["model"] == "big-backend-model"
    assert forwarded["stream_options"] == {"include_usage": True}
    assert {k: v for k, v in forwarded.items() if k not in ("model", "stream_options")} == {
        k: v for k, v in body.items() if k not in ("model", "stream_options")}


async def test_embeddings_go_only_to_a_model_declared_for_them(gw, mock):
    """large-chat does not declare embeddings (models.<name>.serves): refused before the
    backend, next to small-chat, which does."""
    async with gw.client() as client:
        before = await mock.requests()
        refused = await client.post(gw.url + "/v1/embeddings", json={"model": "large-chat", "input": "a b"})
        assert refused.status_code == 400
        assert refused.json()["error"]["code"] == "model_route_unsupported"
        assert refused.json()["error"]["param"] == "model"
        assert await mock.requests() == before
        control = await client.post(gw.url + "/v1/embeddings", json={"model": "small-chat", "input": "a b"})
        assert control.status_code == 200 and await mock.requests() == before + 1


async def test_embeddings_and_completions_routes(gw, mock):
    async with gw.client() as client:
        emb = await client.post(gw.url + "/v1/embeddings", json={"model": "small-chat", "input": ["a b", "c"]})
        comp = await client.post(gw.url + "/v1/completions",
                                 json={"model": "small-chat", "prompt": "once upon", "max_tokens": 3})
        models = await client.get(gw.url + "/v1/models")
    assert emb.status_code == 200 and len(emb.json()["data"]) == 2
    assert comp.status_code == 200 and comp.json()["usage"]["completion_tokens"] == 3
    assert {m["id"] for m in models.json()["data"]} == {"small-chat", "large-chat"}


@pytest.fixture
async def timed_gw(make_gateway):
    async with make_gateway("stream: {idle_timeout_s: 0.3, max_duration_s: 1.0}\n") as running:
        yield running


async def _stream_error(gw, headers: dict, body: dict | None = None) -> tuple[list, httpx.Response]:
    async with gw.client() as client:
        resp = await client.post(gw.url + "/v1/chat/completions",
                                 json=body or chat(max_tokens=1000, stream=True), headers=headers)
    return _events(resp.text), resp


async def test_idle_timeout_ends_stream_with_error_event(timed_gw, mock):
    events, resp = await _stream_error(timed_gw, {"x-mock-stall-after": "2"})
    assert resp.status_code == 200
    assert events[-1]["error"]["code"] == "stream_idle_timeout"
    record = timed_gw.decisions()[-1]
    assert record["reason"] == "stream_idle_timeout" and record["decided_by"] == "forward"
    assert record["usage"]["completion_tokens"] == 2 and record["usage"]["source"] == "counted"
    await _wait_cancelled(mock, 1)


async def test_a_stream_that_keeps_coming_is_never_idle(timed_gw, mock):
    """Chunks every 0.1 s for 0.8 s against a 0.3 s idle limit: after the first event the
    relay takes them from the upstream connection's parser (upstream/stream_relay.py's
    sink), and each one counts as hearing from the backend."""
    events, resp = await _stream_error(timed_gw, {"x-mock-token-rate": "10", "x-mock-tokens": "8"},
                                       chat(max_tokens=8, stream=True))
    assert resp.status_code == 200
    assert events[-1] == "[DONE]" and not any("error" in e for e in events[:-1])
    record = timed_gw.decisions()[-1]
    assert record.get("reason") is None and record["usage"]["completion_tokens"] == 8


async def test_max_duration_ends_stream_with_error_event(timed_gw, mock):
    events, _ = await _stream_error(timed_gw, {"x-mock-token-rate": "20", "x-mock-tokens": "1000"})
    assert events[-1]["error"]["code"] == "stream_duration_exceeded"
    assert 10 <= sum(1 for e in events if "choices" in e) <= 30
    assert timed_gw.decisions()[-1]["reason"] == "stream_duration_exceeded"


async def test_backend_dying_mid_stream_gives_error_event(timed_gw, mock):
    events, _ = await _stream_error(timed_gw, {"x-mock-die-after": "3"})
    assert events[-1]["error"]["code"] == "upstream_unavailable"
    record = timed_gw.decisions()[-1]
    assert record["reason"] == "upstream_unavailable" and record["state"] == "aborted"


async def test_backend_hanging_before_headers_is_a_504(mock, tmp_path):
    config = base_config(mock.url, decisions=str(tmp_path / "d.jsonl")).replace("read_timeout_s: 10",
                                                                                  "read_timeout_s: 0.3")
    async with gateway_in_process(config, tmp_path / "d.jsonl") as running:
        async with running.client() as client:
            resp = await client.post(running.url + "/v1/chat/completions", json=chat(),
                                     headers={"x-mock-hang": "1"})
        assert resp.status_code == 504 and resp.json()["error"]["code"] == "upstream_timeout"
        assert running.decisions()[-1]["reason"] == "upstream_timeout"
    await _wait_cancelled(mock, 1)


async def test_backend_refusing_connections_is_a_502(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    path = tmp_path / "d.jsonl"
    async with gateway_in_process(base_config(f"http://127.0.0.1:{port}/v1", decisions=str(path)), path) as running:
        async with running.client() as client:
            resp = await client.post(running.url + "/v1/chat/completions", json=chat())
            stream = await client.post(running.url + "/v1/chat/completions", json=chat(stream=True))
        assert resp.status_code == 502 and resp.json()["error"]["code"] == "upstream_unavailable"
        assert stream.status_code == 502
        record = running.decisions()[-1]
        assert record["reason"] == "upstream_unavailable" and record["decided_by"] == "forward"


@pytest.mark.parametrize("backend,shape,status,code,message", [
    (500, "json", 502, "upstream_error", "the backend answered 500"),
    (500, "empty", 502, "upstream_error", "the backend answered 500 with an empty body"),
    (502, "text", 502, "upstream_error", "the backend answered 502"),
    (401, "json", 502, "upstream_error", "the backend answered 401"),
    (400, "empty", 400, "upstream_rejected", "the backend answered 400 with an empty body"),
    (400, "json", 400, "upstream_rejected", "the backend refused the request: mock upstream error (status 400)"),
    (422, "detail", 400, "upstream_rejected", "the backend refused the request: mock upstream error (status 422)"),
    (503, "text", 503, "upstream_overloaded", "the backend is overloaded (503); retry shortly"),
    (429, "json", 503, "upstream_overloaded", "the backend is overloaded (429); retry shortly"),
    (504, "empty", 504, "upstream_timeout", "the backend timed out (504)"),
])
@pytest.mark.parametrize("stream", [False, True])
async def test_backend_errors_reach_the_client_as_an_envelope_with_a_reason(gw, mock, backend, shape, status,
                                                                            code, message, stream):
    """Whatever the backend's error body (OpenAI's, empty, HTML, FastAPI's detail), the
    client gets the gateway's envelope with the documented status and code, and nothing
    is charged (the backend generated nothing)."""
    async with gw.client() as client:
        resp = await client.post(gw.url + "/v1/chat/completions", json=chat(stream=stream),
                                 headers={"x-mock-status": str(backend), "x-mock-error-body": shape})
    assert resp.status_code == status
    assert resp.json()["error"]["code"] == code and resp.json()["error"]["message"] == message
    assert resp.headers["x-request-id"].startswith("req_")
    if code == "upstream_overloaded":
        assert resp.headers["retry-after"] == "1"
    record = gw.decisions()[-1]
    assert record["upstream_status"] == backend and record["status"] == status and record["reason"] == code
    assert record["notes"]["budget"]["refunded"] == record["notes"]["budget"]["reserved"]


async def test_backend_error_message_names_the_public_model_not_the_backend_one(gw, mock):
    """large-chat is served as big-backend-model: a backend message naming its own model
    reaches the client with the public name; its Retry-After is passed on."""
    from tokenward.upstream.backend_errors import backend_refusal

    body = orjson.dumps({"object": "error", "message": "The model `big-backend-model` does not exist."})
    refusal = backend_refusal(404, body, None, "big-backend-model", "large-chat")
    assert refusal.message == "the backend refused the request: The model `large-chat` does not exist."
    long_body = orjson.dumps({"detail": "x" * 400})
    assert backend_refusal(400, long_body, None).message == "the backend answered 400"
    assert backend_refusal(429, b"", b" 7 ").headers == ((b"retry-after", b"7"),)
    async with gw.client() as client:
        resp = await client.post(gw.url + "/v1/chat/completions", json=chat(),
                                 headers={"x-mock-status": "429", "x-mock-retry-after": "9"})
    assert resp.status_code == 503 and resp.headers["retry-after"] == "9"


@pytest.mark.parametrize("body,code,param", [
    (b"{not json", "invalid_json", None),
    (b"[1,2]", "invalid_json", None),
    (orjson.dumps(chat(model="nope")), "unknown_model", "model"),
])
async def test_unforwardable_bodies_are_refused(gw, mock, body, code, param):
    async with gw.client() as client:
        resp = await client.post(gw.url + "/v1/chat/completions", content=body,
                                 headers={"content-type": "application/json"})
        control = await client.post(gw.url + "/v1/chat/completions", json=chat())
    assert resp.json()["error"]["code"] == code and resp.status_code in (400, 404)
    assert resp.json()["error"]["param"] == param
    assert control.status_code == 200 and (await mock.stats())["requests"] == 1


async def _wait_cancelled(mock, count: int) -> None:
    import asyncio

    for _ in range(100):
        if (await mock.stats())["cancelled"] >= count:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"backend never saw the cancel: {await mock.stats()}")


async def test_key_store_outage_is_a_clean_503(gw, mock):
    store = gw.gateway.parts.keystore
    fresh_key = await gw.new_key("acme")  # never looked up, so not cached
    real_get = store.get

    async def broken_get(key_id):
        raise OSError("database is unreachable")

    store.get = broken_get
    try:
        async with httpx.AsyncClient() as client:
            resp = await client.post(gw.url + "/v1/chat/completions", json=chat(),
                                     headers={"authorization": f"Bearer {fresh_key}"})
        assert resp.status_code == 503 and resp.json()["error"]["code"] == "keystore_unavailable"
        assert await mock.requests() == 0
    finally:
        store.get = real_get
    async with httpx.AsyncClient() as client:
        control = await client.post(gw.url + "/v1/chat/completions", json=chat(),
                                    headers={"authorization": f"Bearer {fresh_key}"})
    assert control.status_code == 200 and await mock.requests() == 1


@pytest.mark.parametrize("extra,expect", [
    ("", "uuid"),
    ("    request_id_header: x-correlation-id\n", "uuid"),
    ("    request_id_format: gateway\n", "gateway"),
    ("    request_id_header: null\n", None),
])
async def test_the_request_id_sent_upstream_is_configured_per_upstream(mock, tmp_path, extra, expect):
    """Default: ``x-request-id`` as a UUID that maps back to the client's ``req_...`` id."""
    from tests.support import base_config, gateway_in_process
    from tokenward.upstream.forward import upstream_request_id

    config = base_config(mock.url).replace("    read_timeout_s: 10\n", "    read_timeout_s: 10\n" + extra, 1)
    async with gateway_in_process(config) as gw:
        async with gw.client() as client:
            resp = await client.post(gw.url + "/v1/chat/completions", json=chat())
    assert resp.status_code == 200
    client_id = resp.headers["x-request-id"]
    sent = (await mock.stats())["last_request"]["headers"]
    name = "x-correlation-id" if "correlation" in extra else "x-request-id"
    if expect is None:
        assert "x-request-id" not in sent
    elif expect == "gateway":
        assert sent[name] == client_id
    else:
        import uuid

        assert sent[name] == upstream_request_id(client_id) == str(uuid.UUID(sent[name]))
        assert sent[name].split("-")[0] == client_id[4:12]
        assert int(sent[name].split("-")[-1], 16) == int(client_id[12:], 16)


def test_a_header_name_that_is_not_one_is_a_config_error(mock):
    from tests.support import base_config
    from tokenward.config import parse_config
    from tokenward.errors import ConfigError
    from tokenward.upstream.targets import TargetTable

    config = parse_config(base_config(mock.url).replace("    read_timeout_s: 10\n",
                                                        "    read_timeout_s: 10\n    request_id_header: 'x id'\n", 1),
                          environ={})
    with pytest.raises(ConfigError, match="upstreams.mock.request_id_header"):
        TargetTable(config, {})
