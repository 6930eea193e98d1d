"""The whole gateway with its backend in this event loop, through no socket: the in-process
transport (upstream/memory.py) handed to the assembly, the gateway called as an ASGI app by
httpx's ASGITransport. A test can build a gateway this way with its own backend, clock and
stages, through the same constructor ``serve`` uses."""

from __future__ import annotations

import httpx
import pytest

from tests.support import base_config, chat
from tokenward.app import Gateway
from tokenward.config.loader import parse_config
from tokenward.mock.app import MockUpstream
from tokenward.upstream.memory import MemoryTransport


@pytest.fixture
async def in_memory(tmp_path):
    backend = MockUpstream()
    transport = MemoryTransport(backend)
    config = parse_config(base_config("http://backend.invalid/v1", decisions=str(tmp_path / "d.jsonl")),
                          environ={})
    gateway = Gateway(config, transports={"mock": transport})
    await gateway.startup()
    key, _ = await gateway.parts.keys.create("acme")
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=gateway), base_url="http://gateway",
                               headers={"authorization": f"Bearer {key}"})
    try:
        yield client, backend, transport
    finally:
        await client.aclose()
        await gateway.shutdown()


async def test_a_whole_answer_and_a_refusal_with_no_socket(in_memory):
    client, backend, transport = in_memory
    answer = await client.post("/v1/chat/completions", json=chat())
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"]
    assert backend.stats.requests == 1 and transport.requests == 1
    refused = await client.post("/v1/chat/completions", json=chat(model="no-such-model"))
    assert refused.status_code == 404 and refused.headers["x-tokenward-reason"] == "unknown_model"
    assert backend.stats.requests == 1                                   # the refusal never reached it


async def test_a_stream_relays_event_by_event_and_settles_on_its_usage(in_memory):
    client, backend, _ = in_memory
    async with client.stream("POST", "/v1/chat/completions", json=chat(stream=True, max_tokens=5),
                             headers={"x-mock-tokens": "5"}) as resp:
        assert resp.status_code == 200
        text = "".join([part async for part in resp.aiter_text()])
    assert text.rstrip().endswith("data: [DONE]")
    assert text.count("data: ") >= 6 and backend.stats.requests == 1


async def test_an_answer_over_the_size_limit_is_cut_as_from_a_socket(tmp_path):
    """The transport keeps the forwarder's contract: a body larger than the request's answer
    limit raises the same error, so the gateway answers upstream_error (issue 27)."""
    import asyncio

    from tokenward.upstream.response_head import UpstreamTooLarge

    async def big(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        for _ in range(4):
            await send({"type": "http.response.body", "body": b"x" * 1000, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    resp = await MemoryTransport(big).request("POST", "/chat/completions", [], b"{}", timeout=1)
    with pytest.raises(UpstreamTooLarge):
        await resp.read(timeout=1, limit=2500)
    whole = await (await MemoryTransport(big).request("POST", "/x", [], b"{}", timeout=1)).read(timeout=1)
    assert len(whole) == 4000
    await asyncio.sleep(0)
