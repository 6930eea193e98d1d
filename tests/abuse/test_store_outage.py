"""The signal store down: batches fail and are counted (logged once per outage), nothing
else breaks, and they work again when the store is back; a key under reduced concurrency
is refused budget_store_unavailable while its slots cannot be counted (closed, as the
budget fails), never a 500."""

from __future__ import annotations

import asyncio


from tests.control.conftest import ADMIN, bearer, chat, gateway, write_config

# one decision, as the observer records it (abuse/observe.py's fields)
OBSERVED = (0.0, "acme", "k", None, 200, 1, False, "small-chat", False, True, False, None, None)


async def test_batches_fail_quietly_and_recover(tmp_path, backend, redis_server, caplog):
    config = write_config(tmp_path, backend.port, store={"url": redis_server.url, "timeout_ms": 200},
                          abuse={"shadow": True, "batch_s": 0.05})
    async with gateway(config) as gw:
        plaintext = await gw.new_key()
        key = bearer(plaintext)
        assert (await gw.client.post("/v1/chat/completions", json=chat(), headers=key)).status_code == 200
        resp = await gw.admin("/admin/abuse/actions", {"action": "reduce_concurrency", "key_id": plaintext,
                                                      "for": "1h", "reason": "r"})
        assert resp.status_code == 201
        enforcement = gw.parts.enforcement
        errors = enforcement.store_errors
        redis_server.stop()
        try:
            gw.parts.abuse.observer.buffer.append(OBSERVED)
            for _ in range(100):
                if enforcement.store_errors > errors:
                    break
                await asyncio.sleep(0.05)
            assert enforcement.store_errors > errors
            before = await backend.requests()
            resp = await gw.client.post("/v1/chat/completions", json=chat(), headers=key)
            assert resp.status_code == 503 and resp.json()["error"]["code"] == "budget_store_unavailable"
            assert await backend.requests() == before
            assert (await gw.client.get("/admin/status.json", headers=ADMIN)).status_code == 200
        finally:
            redis_server.start()
        warnings = [r for r in caplog.records if "abuse signal batches are failing" in r.getMessage()]
        assert len(warnings) == 1
        for _ in range(100):
            if any("work again" in r.getMessage() for r in caplog.records):
                break
            gw.parts.abuse.observer.buffer.append(OBSERVED)
            await asyncio.sleep(0.05)
        assert any("work again" in r.getMessage() for r in caplog.records)
        for _ in range(100):   # the budget's breaker lets a probe through and closes
            resp = await gw.client.post("/v1/chat/completions", json=chat(), headers=key)
            if resp.status_code == 200:
                break
            await asyncio.sleep(0.05)
        assert resp.status_code == 200, resp.text
