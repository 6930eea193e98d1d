"""Pausing a capability for a tenant (tools, streaming, model:NAME, all), for a duration,
through the admin API: refused with capability_paused while it lasts, each change audited."""

from __future__ import annotations

import pytest

from .conftest import Clock, bearer, chat, gateway, refused, tools_chat, write_config


@pytest.fixture
def clock():
    return Clock()


async def test_pause_and_resume_tools(tmp_path, backend, clock):
    async with gateway(write_config(tmp_path, backend.port), clock) as gw:
        key = bearer(await gw.new_key())
        other = bearer(await gw.new_key("umbrella"))
        resp = await gw.admin("/admin/tenants/acme/pause", {"capability": "tools", "for": "1h",
                                                           "reason": "tool abuse incident", "reviewer": "ops"})
        assert resp.status_code == 200, resp.text
        assert resp.json()["control"]["until"] == pytest.approx(clock.now + 3600)
        before = await backend.requests()
        error = await refused(await gw.client.post("/v1/chat/completions", json=tools_chat(), headers=key),
                              403, "capability_paused", backend, before)
        assert "tool use is paused" in error["message"]
        ok = await gw.client.post("/v1/chat/completions", json=chat(), headers=key)   # no tools: goes through
        assert ok.status_code == 200, ok.text
        assert (await gw.client.post("/v1/chat/completions", json=chat(), headers=other)).status_code == 200
        resp = await gw.admin("/admin/tenants/acme/resume", {"capability": "tools", "reason": "incident over"})
        assert resp.status_code == 200, resp.text
        assert (await gw.client.post("/v1/chat/completions", json=tools_chat(), headers=key)).status_code == 200
        actions = [(a["action"], a["scope"], a["reviewer"], a["reason"]) for a in await gw.audit()
                   if a["action"].startswith("tenant:")]
        assert actions == [("tenant:pause", "tenant:acme:tools", "ops", "tool abuse incident"),
                           ("tenant:resume", "tenant:acme:tools", "admin-api", "incident over")]


@pytest.mark.parametrize("capability, body, other", [
    ("streaming", chat(stream=True), chat()),
    ("model:large-chat", chat("large-chat"), chat()),
    ("all", chat(), None),
])
async def test_each_capability(tmp_path, backend, clock, capability, body, other):
    async with gateway(write_config(tmp_path, backend.port), clock) as gw:
        key = bearer(await gw.new_key())
        resp = await gw.admin("/admin/tenants/acme/pause", {"capability": capability, "for": 600, "reason": "r"})
        assert resp.status_code == 200, resp.text
        before = await backend.requests()
        resp = await gw.client.post("/v1/chat/completions", json=body, headers=key)
        await refused(resp, 403, "capability_paused", backend, before)
        assert resp.headers["retry-after"] == "600"
        if other is not None:
            assert (await gw.client.post("/v1/chat/completions", json=other, headers=key)).status_code == 200
        clock.advance(601)   # the pause ends by itself: no message needed
        assert (await gw.client.post("/v1/chat/completions", json=body, headers=key)).status_code == 200


async def test_bad_requests_are_named_and_record_nothing(tmp_path, backend, clock):
    async with gateway(write_config(tmp_path, backend.port), clock) as gw:
        cases = [
            ("/admin/tenants/acme/pause", {"capability": "video", "for": "1h", "reason": "r"}, 400, "capability"),
            ("/admin/tenants/acme/pause", {"capability": "model:nope", "for": "1h", "reason": "r"}, 400, "capability"),
            ("/admin/tenants/acme/pause", {"capability": "tools", "reason": "r"}, 400, "for"),
            ("/admin/tenants/acme/pause", {"capability": "tools", "for": "soon", "reason": "r"}, 400, "for"),
            ("/admin/tenants/acme/pause", {"capability": "tools", "for": "1h"}, 400, "reason"),
            ("/admin/tenants/acme/resume", {"capability": "tools", "reason": "r"}, 400, "capability"),
            ("/admin/tenants/nobody/pause", {"capability": "tools", "for": "1h", "reason": "r"}, 404, "tenant"),
        ]
        for path, body, status, param in cases:
            resp = await gw.admin(path, body)
            assert resp.status_code == status, (body, resp.text)
            assert resp.json()["error"]["param"] == param, resp.text
        assert not [a for a in await gw.audit() if a["action"].startswith("tenant:")]
        resp = await gw.client.post("/admin/tenants/acme/pause", json={"capability": "tools", "for": "1h",
                                                                      "reason": "r"})
        assert resp.status_code == 401 and resp.headers["www-authenticate"].startswith("Basic")
