"""The edge's own refusals on a dialect's path (a method, a media type the route does not
take) are in that API's envelope too: the dialect's way out is installed before the edge
runs (stages/s01_dialect_exit.py, first in stages/order.py)."""

from __future__ import annotations

import httpx
import pytest

from tests.dialects.gateway import dialect_gateway


@pytest.fixture
async def running(tmp_path):
    async with dialect_gateway(tmp_path) as pair:
        yield pair


@pytest.mark.parametrize("method,headers,status,code", [
    ("GET", {}, 405, "method_not_allowed"),
    ("POST", {"content-type": "text/plain"}, 415, "unsupported_media_type"),
])
async def test_the_edges_refusals_on_messages_are_anthropics_and_on_responses_openais(running, method, headers,
                                                                                       status, code):
    backend, gw = running
    before = await backend.requests()
    async with httpx.AsyncClient(base_url=gw.url, headers={"x-api-key": gw.extra["keys"]["team"],
                                                           "anthropic-version": "2023-06-01", **headers}) as http:
        messages = await http.request(method, "/v1/messages", content=b"{}")
        responses = await http.request(method, "/v1/responses", content=b"{}")
        chat = await http.request(method, "/v1/chat/completions", content=b"{}")
    for resp in (messages, responses, chat):
        assert resp.status_code == status and resp.headers["x-tokenward-reason"] == code
    body = messages.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error", body
    assert set(body) == {"type", "error", "request_id"}          # Anthropic's envelope, not OpenAI's
    assert "error" in responses.json() and responses.json()["error"]["code"] == code
    assert chat.json()["error"]["code"] == code                  # the control: chat's own envelope
    assert await backend.requests() == before                    # nothing reached the backend
