"""A native upstream that lies about usage in the dialect's own fields (negative, absurd,
missing): the gateway reads it through the same bounds as a chat backend's report
(upstream/usage_report.py ``bounded``), records and counts what it cut, and charges no
more than the request could have used. The backend is an ASGI app in the test's loop,
reached through the in-process transport (upstream/memory.py)."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.dialects.gateway import MODEL, config
from tokenward.app import Gateway
from tokenward.config.loader import parse_config
from tokenward.upstream.memory import MemoryTransport


def lying(usage: dict | None):
    async def app(scope, receive, send):
        await receive()
        body = {"id": "resp_lie", "object": "response", "created_at": 1, "status": "completed", "model": MODEL,
                "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                            "content": [{"type": "output_text", "text": "hi", "annotations": []}]}],
                "usage": usage}
        data = json.dumps(body).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(data))]})
        await send({"type": "http.response.body", "body": data})
    return app


@pytest.mark.parametrize("usage,cut", [
    ({"input_tokens": 10**12, "output_tokens": 10**12, "total_tokens": 2 * 10**12}, True),
    ({"input_tokens": -5, "output_tokens": -7, "total_tokens": -12}, False),   # unreadable: charged in full
    ({"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}, False),      # the control: kept as said
])
async def test_a_native_backends_usage_is_held_to_the_requests_bounds(tmp_path, usage, cut):
    """Absurd counts are clamped to the bounds (and recorded); negative ones are no usage
    at all, so the request is charged its whole reservation, never less."""
    transport = MemoryTransport(lying(usage))
    gateway = Gateway(parse_config(config("http://backend.invalid/v1", tmp_path, ("chat", "responses")), environ={}),
                      transports={"mock": transport})
    await gateway.startup()
    try:
        key, _ = await gateway.parts.keys.create("team")
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=gateway), base_url="http://gw") as client:
            resp = await client.post("/v1/responses", headers={"authorization": f"Bearer {key}"},
                                     json={"model": MODEL, "input": "hello", "max_output_tokens": 20})
        assert resp.status_code == 200, resp.text
        assert transport.requests == 1
        gateway.parts.decisions.flush()
        record = [json.loads(line) for line in (tmp_path / "decisions.jsonl").read_text().splitlines()][-1]
        reported, budget = record["usage"], record["notes"]["budget"]
        clamped = sum(gateway.parts.metrics.usage_clamped.values())
        assert ("usage_out_of_bounds" in record["notes"]) is cut and (clamped > 0) is cut
        if usage["input_tokens"] < 0:
            assert reported == {} and budget["settle"] == "full" and budget["refunded"] == 0
            return
        assert 0 <= reported["completion_tokens"] <= 20 and reported["prompt_tokens"] >= 0
        assert 0 <= budget["actual"] <= budget["reserved"]
        if cut:
            assert budget["actual"] == budget["reserved"]            # charged at most what it reserved
        else:
            assert (reported["prompt_tokens"], reported["completion_tokens"]) == (3, 2) and budget["actual"] == 5
    finally:
        await gateway.shutdown()
