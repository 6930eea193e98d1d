"""Cancelling a tenant's open streams on one gateway: each ends at once with an in-band
stream_cancelled event, the backend sees its client go (cancelled, no more tokens), the
reservation settles on the usage the stream had shown, other tenants' streams go on."""

from __future__ import annotations

import asyncio
import json
import time

import httpx

from tokenward.budget.limits import tenant_namespace

from .conftest import bearer, chat, gateway, write_config

SLOW = {"x-mock-token-rate": "50", "x-mock-tokens": "100000"}


async def _open_stream(client: httpx.AsyncClient, url: str, key: dict, events: list, ended: dict, name: str):
    body = chat(max_tokens=8000, stream=True)
    async with client.stream("POST", url + "/v1/chat/completions", json=body, headers={**key, **SLOW}) as resp:
        assert resp.status_code == 200
        async for line in resp.aiter_lines():
            if line.startswith("data: "):
                events.append((name, line[6:]))
    ended[name] = time.monotonic()


async def wait_for(predicate, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while not await predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_cancel_streams_in_one_gateway(tmp_path, backend):
    async with gateway(write_config(tmp_path, backend.port)) as gw:
        mine = [bearer(await gw.new_key()) for _ in range(2)]
        theirs = bearer(await gw.new_key("umbrella"))
        events: list = []
        ended: dict = {}
        async with httpx.AsyncClient(timeout=20) as client:
            tasks = [asyncio.ensure_future(_open_stream(client, gw.url, k, events, ended, n))
                     for n, k in (("a", mine[0]), ("b", mine[1]), ("other", theirs))]

            async def streaming() -> bool:
                return (await backend.stats())["active_streams"] == 3 and len({n for n, _ in events}) == 3
            await wait_for(streaming)
            before = await backend.stats()
            asked = time.monotonic()
            resp = await gw.admin("/admin/tenants/acme/cancel-streams", {"reason": "incident 42", "reviewer": "ops"})
            assert resp.status_code == 200, resp.text
            assert resp.json()["cancelled_here"] == 2
            await asyncio.wait_for(asyncio.gather(*tasks[:2]), 5)
            assert max(ended["a"], ended["b"]) - asked < 0.1
            for name in ("a", "b"):
                last = json.loads([e for n, e in events if n == name][-1])
                assert last["error"]["code"] == "stream_cancelled"
            stats = await backend.stats()
            assert stats["cancelled"] == before["cancelled"] + 2 and stats["active_streams"] == 1
            generated = stats["tokens_generated"]
            await asyncio.sleep(0.3)
            assert not tasks[2].done()   # another tenant's stream goes on
            grown = (await backend.stats())["tokens_generated"] - generated
            assert 0 < grown <= 0.3 * 50 * 1.5 + 5   # only the one stream left is generating
            tasks[2].cancel()
            await asyncio.gather(tasks[2], return_exceptions=True)
        store = gw.parts.budget.shared.store
        leases = tenant_namespace("tw", "acme") + ":leases"

        async def settled() -> bool:
            return await store.open_reservations(leases) == 0
        await wait_for(settled, 5)
        trail = [a for a in await gw.audit() if a["action"] == "tenant:cancel_streams"]
        assert [(a["scope"], a["reason"], a["reviewer"]) for a in trail] == [("tenant:acme", "incident 42", "ops")]
        records = [r for r in (await _decisions(tmp_path)) if r.get("reason") == "stream_cancelled"]
        assert len(records) == 2 and all(r["notes"]["budget"]["settle"] == "usage" for r in records)


async def _decisions(tmp_path) -> list[dict]:
    await asyncio.sleep(0.2)   # records are flushed every 100 ms
    path = tmp_path / "decisions.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line]
