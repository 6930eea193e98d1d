"""Every refusal, on every route, names its reason code in ``x-tokenward-reason`` (shared/
spec/interfaces.md, last section), equal to the body's ``error.code``: the pipeline's, the
forwarder's (a backend's failure), the HTTP server's own (before the app runs), the agent-
job routes', the admin API's (its own codes too), and the gateway's while it starts.
A refusal without the header, or with another code, fails here.
"""

from __future__ import annotations

import asyncio

import orjson
import pytest

from tests.adversarial.test_hostile_clients import BODY, chat_head, gateway, mock, port_of  # noqa: F401
from tests.http.helpers import read_response
from tests.support import chat

ADMIN_ENV = "TW_REASON_HEADER_ADMIN"
ADMIN = {"authorization": "Bearer admin-token-for-the-reason-header-test"}


def named(status: int, headers, body: bytes, expect: str | None = None) -> str:
    """The code a refusal names; fails unless body and header name the same one."""
    assert status >= 400, (status, body)
    code = orjson.loads(body)["error"]["code"]
    assert headers.get("x-tokenward-reason") == code, (status, dict(headers), body)
    if expect is not None:
        assert code == expect, body
    return code


async def raw(gw, data: bytes, timeout: float = 3.0):
    reader, writer = await asyncio.open_connection("127.0.0.1", port_of(gw))
    try:
        writer.write(data)
        return await asyncio.wait_for(read_response(reader), timeout)
    finally:
        writer.close()


def _pipeline_cases(key: str, revoked: str) -> list[tuple[str, str, dict, str]]:
    """(method, path, httpx kwargs, expected code) through the pipeline and the forwarder."""
    bearer = {"authorization": f"Bearer {key}"}
    return [
        ("POST", "/v1/nope", {"json": chat(), "headers": bearer}, "route_denied"),
        ("GET", "/v1/chat/completions", {"headers": bearer}, "method_not_allowed"),
        ("POST", "/v1/chat/completions", {"content": BODY, "headers": {**bearer, "content-type": "text/plain"}},
         "unsupported_media_type"),
        ("POST", "/v1/chat/completions", {"json": chat()}, "missing_credentials"),
        ("POST", "/v1/chat/completions", {"json": chat(), "headers": {"authorization": "Bearer tw_0_x"}},
         "invalid_credentials"),
        ("POST", "/v1/chat/completions", {"json": chat(), "headers": {"authorization": f"Bearer {revoked}"}},
         "key_revoked"),
        ("POST", "/v1/chat/completions", {"content": b"{", "headers": {**bearer, "content-type": "application/json"}},
         "invalid_json"),
        ("POST", "/v1/chat/completions", {"json": {**chat(), "surprise": 1}, "headers": bearer}, "unknown_field"),
        ("POST", "/v1/chat/completions", {"json": chat(model="no-such-model"), "headers": bearer}, None),
        ("POST", "/v1/chat/completions", {"json": {**chat(), "max_tokens": None}, "headers": bearer}, None),
        ("POST", "/v1/chat/completions", {"json": chat(), "headers": {**bearer, "x-mock-status": "503"}},
         "upstream_overloaded"),
        ("POST", "/v1/chat/completions", {"json": chat(), "headers": {**bearer, "x-mock-status": "400"}},
         "upstream_rejected"),
        ("POST", "/v1/chat/completions", {"json": chat(), "headers": {**bearer, "x-mock-status": "500"}}, None),
        ("GET", "/v1/models", {}, "missing_credentials"),
        ("GET", "/metrics", {"headers": bearer}, "route_denied"),      # not exposed on this listener
        ("POST", "/openapi.json", {"headers": bearer}, "route_denied"),
        # the agent-job routes
        ("POST", "/v1/jobs", {"json": {"budget_tokens": 100}}, "missing_credentials"),
        ("PUT", "/v1/jobs", {"headers": bearer}, "method_not_allowed"),
        ("GET", "/v1/jobs/job_a/b", {"headers": bearer}, "route_denied"),
        ("GET", "/v1/jobs/job_nothere", {"headers": bearer}, "job_not_found"),
        ("POST", "/v1/jobs", {"content": b"x", "headers": {**bearer, "content-type": "text/plain"}},
         "unsupported_media_type"),
        # the admin API, its own codes included
        ("GET", "/admin/keys", {}, "missing_credentials"),
        ("GET", "/admin/keys", {"headers": {"authorization": "Bearer wrong"}}, "invalid_credentials"),
        ("GET", "/admin/nothing-here", {"headers": ADMIN}, "route_denied"),
        ("GET", "/admin/keys/0123456789abcdef", {"headers": ADMIN}, "key_not_found"),
        ("POST", "/admin/keys", {"content": b"{", "headers": ADMIN}, "invalid_json"),
        ("POST", "/admin/keys", {"json": {"tenant": ""}, "headers": ADMIN}, "invalid_field"),
        ("POST", "/admin/tenants/nobody/pause", {"json": {"reason": "x"}, "headers": ADMIN}, "tenant_not_found"),
    ]


@pytest.fixture
async def gw(mock, monkeypatch):  # noqa: F811 - the mock fixture is imported
    monkeypatch.setenv(ADMIN_ENV, ADMIN["authorization"].removeprefix("Bearer "))
    async with gateway(mock, extra=f"admin: {{token_env: {ADMIN_ENV}}}\nserver: {{head_timeout_s: 1}}\n",
                       max_connections=8) as running:
        yield running


async def test_every_refusal_class_names_its_reason_in_the_header(gw, mock):
    keys = gw.gateway.parts.keys
    revoked = await gw.new_key()
    await keys.revoke(revoked.split("_")[1], reason="test", reviewer="test")
    before = await mock.requests()
    seen = set()
    async with gw.client() as client:
        client.headers.pop("authorization")
        for method, path, kwargs, expect in _pipeline_cases(gw.key, revoked):
            resp = await client.request(method, gw.url + path, **kwargs)
            seen.add(named(resp.status_code, resp.headers, resp.content, expect))
    # three reached the backend (its 503, 400 and 500), nothing else did
    assert await mock.requests() == before + 3
    assert {"upstream_overloaded", "upstream_rejected", "tenant_not_found", "job_not_found"} <= seen


SERVER_REFUSALS = {
    "malformed_request": chat_head(b"authorization: Bearer a\r\nauthorization: Bearer b\r\n") + BODY,
    "headers_too_large": b"GET /healthz HTTP/1.1\r\nhost: x\r\n" + b"x-h: v\r\n" * 100 + b"\r\n",
    "transfer_encoding_unsupported": b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n"
                                     b"transfer-encoding: xchunked\r\n\r\n",
    "body_too_large": chat_head(length=100_000_000),
    "request_timeout": b"GET /healthz HTTP/1.1\r\nhost: x\r\n",   # and then nothing: the head deadline
}


@pytest.mark.parametrize("code,data", SERVER_REFUSALS.items(), ids=SERVER_REFUSALS.keys())
async def test_the_servers_own_refusals_name_their_reason(gw, code, data):
    named(*await raw(gw, data), expect=code)


async def test_too_many_connections_names_its_reason(gw, mock):
    held = [await asyncio.open_connection("127.0.0.1", port_of(gw)) for _ in range(8)]
    try:
        answer = await raw(gw, b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        named(*answer, expect="too_many_connections")
        assert answer[1]["retry-after"] == "1"
    finally:
        for _, writer in held:
            writer.close()


async def test_every_route_names_the_reason_of_whatever_it_refuses(gw):
    """A walk over every configured route and the gateway's own, with each method and with
    and without a key: whatever is refused says why in the header."""
    paths = [route.path for route in gw.gateway.config.routes] + [
        "/healthz", "/readyz", "/metrics", "/openapi.json", "/v1/jobs", "/v1/jobs/job_x", "/admin/keys",
        "/admin/status", "/admin/controls", "/elsewhere"]
    refused = 0
    async with gw.client() as client:
        for path in paths:
            for method in ("GET", "POST", "PUT", "DELETE"):
                for auth in ({"authorization": ""}, {}):
                    resp = await client.request(method, gw.url + path, headers=auth, content=BODY)
                    if resp.status_code >= 400 and resp.headers.get("content-type") == "application/json" \
                            and "error" in resp.json():
                        named(resp.status_code, resp.headers, resp.content)
                        refused += 1
                    elif resp.status_code >= 400:   # only readiness reports a status, not a refusal
                        assert path == "/readyz", (method, path, resp.status_code, resp.text)
    assert refused >= 3 * len(paths)


async def test_a_gateway_still_starting_names_its_reason():
    """Before start-up has run, the app itself refuses (under any ASGI server)."""
    from tests.support import base_config
    from tokenward.app import Gateway
    from tokenward.config import parse_config

    app = Gateway(parse_config(base_config("http://127.0.0.1:9/v1"), environ={}))
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    for path in ("/v1/chat/completions", "/v1/jobs"):
        sent.clear()
        scope = {"type": "http", "method": "POST", "path": path, "headers": [], "query_string": b""}
        await app(scope, receive, send)
        headers = dict(sent[0]["headers"])
        named(sent[0]["status"], {k.decode(): v.decode() for k, v in headers.items()}, sent[1]["body"],
              "budget_store_unavailable")
