"""Abuse actions applied by an operator (the engine applies the same ones automatically):
each refusal names the action, never a signal; reinstatement restores service at once and
the audit trail holds action, reason, reviewer and appeal outcome."""

from __future__ import annotations

import asyncio

import pytest

from .conftest import Clock, bearer, chat, gateway, refused, tools_chat, write_config


@pytest.fixture
def clock():
    return Clock()


async def test_suspend_then_reinstate_with_appeal(tmp_path, backend, clock):
    async with gateway(write_config(tmp_path, backend.port), clock) as gw:
        plaintext = await gw.new_key()
        key, key_id = bearer(plaintext), plaintext[3:19]
        neighbour = bearer(await gw.new_key())
        resp = await gw.admin("/admin/abuse/actions", {"action": "suspend", "key_id": plaintext, "for": "2h",
                                                      "reason": "reported by the customer", "reviewer": "alice"})
        assert resp.status_code == 201, resp.text
        assert resp.json()["control"]["scope"] == f"key:{key_id}"
        before = await backend.requests()
        resp = await gw.client.post("/v1/chat/completions", json=chat(), headers=key)
        error = await refused(resp, 403, "key_suspended", backend, before)
        assert resp.headers["retry-after"] == "7200" and "signal" not in error["message"]
        assert (await gw.client.post("/v1/chat/completions", json=chat(), headers=neighbour)).status_code == 200
        resp = await gw.admin("/admin/abuse/reinstate", {"key_id": key_id, "reason": "customer rotated it",
                                                        "reviewer": "bob", "appeal": "upheld"})
        assert resp.status_code == 200, resp.text
        assert (await gw.client.post("/v1/chat/completions", json=chat(), headers=key)).status_code == 200
        trail = [a for a in await gw.audit() if a["key_id"] == key_id and a["action"].startswith("abuse:")]
        assert [(a["action"], a["reason"], a["reviewer"], a["detail"].get("appeal")) for a in trail] == [
            ("abuse:suspend", "reported by the customer", "alice", None),
            ("abuse:reinstate", "customer rotated it", "bob", "upheld")]
        assert trail[0]["duration_s"] == 7200 and trail[0]["detail"]["automatic"] is False
        resp = await gw.admin("/admin/abuse/reinstate", {"key_id": key_id, "reason": "again"})
        assert resp.status_code == 400   # nothing left to reinstate: said, not silently done


async def test_restrict_refuses_tools_and_clamps_output(tmp_path, backend, clock):
    async with gateway(write_config(tmp_path, backend.port), clock) as gw:
        plaintext = await gw.new_key()
        key = bearer(plaintext)
        resp = await gw.admin("/admin/abuse/actions", {"action": "restrict", "key_id": plaintext, "for": "1h",
                                                      "reason": "r", "max_output_tokens": 32})
        assert resp.status_code == 201, resp.text
        before = await backend.requests()
        resp = await gw.client.post("/v1/chat/completions", json=tools_chat(), headers=key)
        error = await refused(resp, 403, "key_restricted", backend, before)
        assert error["param"] == "tools"
        resp = await gw.client.post("/v1/chat/completions", json=chat(max_tokens=4000), headers=key)
        assert resp.status_code == 200, resp.text
        assert (await backend.last_body())["max_tokens"] == 32
        clock.advance(3601)
        assert (await gw.client.post("/v1/chat/completions", json=tools_chat(), headers=key)).status_code == 200


async def test_reduce_concurrency_takes_a_slot_per_open_request(tmp_path, backend, clock):
    async with gateway(write_config(tmp_path, backend.port), clock) as gw:
        plaintext = await gw.new_key()
        key = bearer(plaintext)
        resp = await gw.admin("/admin/abuse/actions", {"action": "reduce_concurrency", "key_id": plaintext,
                                                      "for": "1h", "reason": "r", "concurrency": 1})
        assert resp.status_code == 201, resp.text
        held = asyncio.ensure_future(gw.client.post("/v1/chat/completions", json=chat(),
                                                    headers={**key, "x-mock-hold": "one"}))
        for _ in range(200):
            if (await backend.stats())["held"] == 1:
                break
            await asyncio.sleep(0.01)
        before = await backend.requests()
        resp = await gw.client.post("/v1/chat/completions", json=chat(), headers=key)
        await refused(resp, 429, "key_concurrency_reduced", backend, before)
        assert resp.headers["retry-after"] == "1"
        await backend.client.post("/_mock/release", json={"name": "one"})
        assert (await held).status_code == 200
        assert (await gw.client.post("/v1/chat/completions", json=chat(), headers=key)).status_code == 200


async def test_operator_action_bad_input(tmp_path, backend, clock):
    async with gateway(write_config(tmp_path, backend.port), clock) as gw:
        plaintext = await gw.new_key()
        for body, param in [({"action": "ban", "key_id": plaintext, "reason": "r"}, "action"),
                            ({"action": "reduce_concurrency", "key_id": plaintext, "reason": "r",
                              "concurrency": 0}, "concurrency"),
                            ({"action": "restrict", "key_id": plaintext, "reason": "r", "concurrency": 2},
                             "concurrency"),
                            ({"action": "suspend", "reason": "r"}, "key_id"),
                            ({"action": "suspend", "key_id": "tw_nope", "reason": "r"}, "key_id")]:
            resp = await gw.admin("/admin/abuse/actions", body)
            assert resp.status_code == 400, (body, resp.text)
            assert resp.json()["error"]["param"] == param
        resp = await gw.admin("/admin/abuse/reinstate", {"key_id": plaintext, "reason": "r", "appeal": "maybe"})
        assert resp.status_code == 400 and resp.json()["error"]["param"] == "appeal"
        assert not [a for a in await gw.audit() if a["action"].startswith("abuse:")]


@pytest.mark.parametrize("shared", [False, True], ids=["memory", "redis"])
async def test_reduced_concurrency_holds_under_a_concurrent_burst(tmp_path, backend, clock, shared, request):
    sections = {"store": {"url": request.getfixturevalue("redis_server").url}} if shared else {}
    async with gateway(write_config(tmp_path, backend.port, **sections), clock) as gw:
        plaintext = await gw.new_key()
        key = bearer(plaintext)
        resp = await gw.admin("/admin/abuse/actions", {"action": "reduce_concurrency", "key_id": plaintext,
                                                      "for": "1h", "reason": "r", "concurrency": 2})
        assert resp.status_code == 201, resp.text
        before = await backend.requests()
        burst = [asyncio.ensure_future(gw.client.post("/v1/chat/completions", json=chat(),
                                                      headers={**key, "x-mock-hold": "burst"})) for _ in range(8)]
        done, pending = await asyncio.wait(burst, timeout=2)   # the refusals come back at once
        assert len(pending) == 2
        assert sorted(t.result().json()["error"]["code"] for t in done) == ["key_concurrency_reduced"] * 6
        assert await backend.requests() == before + 2
        await backend.client.post("/_mock/release", json={"name": "burst"})
        assert [r.status_code for r in await asyncio.gather(*pending)] == [200, 200]
        assert (await gw.client.post("/v1/chat/completions", json=chat(), headers=key)).status_code == 200
