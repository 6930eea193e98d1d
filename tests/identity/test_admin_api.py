"""The admin API under /admin/: the key lifecycle over HTTP, behind the admin token."""

from __future__ import annotations

import time

from tests.identity.conftest import ADMIN_TOKEN, bearer, chat, run_gateway, write_config

ADMIN = bearer(ADMIN_TOKEN)


async def test_admin_api_needs_the_admin_token(gw, backend):
    key = await gw.new_key()
    for headers, status, code in (({}, 401, "missing_credentials"),
                                  (bearer("wrong-token"), 401, "invalid_credentials"),
                                  (bearer(key), 401, "invalid_credentials")):
        resp = await gw.client.get("/admin/keys", headers=headers)
        assert resp.status_code == status and resp.json()["error"]["code"] == code
    assert key[20:] not in (await gw.client.get("/admin/keys", headers=ADMIN)).text
    resp = await gw.client.get("/admin/nothing-here", headers=ADMIN)
    assert resp.status_code == 404 and resp.json()["error"]["code"] == "route_denied"


async def test_admin_lifecycle_with_audit_records(gw, backend):
    resp = await gw.client.post("/admin/keys", headers=ADMIN, json={
        "tenant": "acme", "name": "batch-job", "models": ["small-chat"], "expires_in": "30d",
        "reason": "nightly batch", "reviewer": "alice"})
    assert resp.status_code == 201, resp.text
    created = resp.json()
    key, key_id = created["key"], created["id"]
    assert key.startswith(f"tw_{key_id}_") and "secret_hash" not in created
    assert created["expires_at"] > time.time() + 29 * 86400 and created["models"] == ["small-chat"]
    assert (await gw.post("/v1/chat/completions", chat(), bearer(key))).status_code == 200

    listed = (await gw.client.get("/admin/keys?tenant=acme", headers=ADMIN)).json()["data"]
    assert [k["id"] for k in listed] == [key_id] and "secret_hash" not in listed[0]
    assert key not in str(listed)

    resp = await gw.client.post(f"/admin/keys/{key_id}/suspend", headers=ADMIN,
                                json={"for": "1h", "reason": "anomaly", "reviewer": "bob"})
    assert resp.status_code == 200 and resp.json()["state"] == "suspended"
    resp = await gw.post("/v1/chat/completions", chat(), bearer(key))
    assert resp.status_code == 403 and resp.json()["error"]["code"] == "key_suspended"

    resp = await gw.client.post(f"/admin/keys/{key_id}/reinstate", headers=ADMIN, json={"reason": "checked"})
    assert resp.status_code == 200 and resp.json()["state"] == "active"
    assert (await gw.post("/v1/chat/completions", chat(), bearer(key))).status_code == 200

    # The whole key works as the id (a leaked key found in a log).
    resp = await gw.client.post(f"/admin/keys/{key}/revoke", headers=ADMIN, json={"reason": "leaked"})
    assert resp.status_code == 200 and resp.json()["state"] == "revoked"
    resp = await gw.post("/v1/chat/completions", chat(), bearer(key))
    assert resp.status_code == 401 and resp.json()["error"]["code"] == "key_revoked"

    trail = (await gw.client.get(f"/admin/audit?key_id={key_id}", headers=ADMIN)).json()["data"]
    assert [(a["action"], a["reason"], a["reviewer"]) for a in trail] == [
        ("create", "nightly batch", "alice"), ("suspend", "anomaly", "bob"),
        ("reinstate", "checked", "admin-api"), ("revoke", "leaked", "admin-api")]
    assert trail[1]["duration_s"] == 3600 and trail[1]["scope"] == f"key:{key_id}"
    assert (await gw.client.get(f"/admin/keys/{key_id}", headers=ADMIN)).json()["state"] == "revoked"


async def test_admin_input_errors(gw, backend):
    cases = [
        ("/admin/keys", {"tenant": "nobody"}, 400, "invalid_field"),
        ("/admin/keys", {"tenant": "globex", "models": ["large-chat"]}, 400, "invalid_field"),
        ("/admin/keys", {"tenant": "acme", "expires_in": "soon"}, 400, "invalid_field"),
        ("/admin/keys/0123456789abcdef/revoke", {"reason": "x"}, 404, "key_not_found"),
        ("/admin/keys/not-a-key/revoke", {"reason": "x"}, 400, "invalid_field"),
    ]
    for path, body, status, code in cases:
        resp = await gw.client.post(path, headers=ADMIN, json=body)
        assert (resp.status_code, resp.json()["error"]["code"]) == (status, code), (path, resp.text)
    key_id = (await gw.keys.create("acme"))[1].id
    resp = await gw.client.post(f"/admin/keys/{key_id}/revoke", headers=ADMIN, json={})
    assert resp.status_code == 400 and resp.json()["error"]["param"] == "reason"
    resp = await gw.client.post(f"/admin/keys/{key_id}/suspend", headers=ADMIN, json={"reason": "x"})
    assert resp.status_code == 400 and resp.json()["error"]["param"] == "for"
    resp = await gw.client.post(f"/admin/keys/{key_id}/reinstate", headers=ADMIN, json={"reason": "x"})
    assert resp.status_code == 409 and resp.json()["error"]["code"] == "key_state_conflict"
    resp = await gw.client.post("/admin/keys", headers={**ADMIN, "content-type": "application/json"},
                                content=b"{not json")
    assert resp.status_code == 400 and resp.json()["error"]["code"] == "invalid_json"


async def test_admin_routes_are_denied_when_no_admin_token_is_configured(tmp_path, backend):
    async with run_gateway(write_config(tmp_path, backend.port, admin={"token_env": None})) as gw:
        resp = await gw.client.get("/admin/keys", headers=ADMIN)
        assert resp.status_code == 404 and resp.json()["error"]["code"] == "route_denied"
