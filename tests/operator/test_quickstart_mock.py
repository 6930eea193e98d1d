"""The quickstart's built-in mock is steerable end to end: its controls (``/_mock/stats``,
``POST /_mock/release``) answer on the gateway's own port, so a request held with
``x-mock-hold`` can be let go from the shell, and ``x-mock-tokens`` sets the answer's length.
A gateway without a built-in mock still answers ``/_mock/*`` with ``route_denied``."""

from __future__ import annotations

import asyncio
import re

import httpx

from tests.e2e.test_quickstart_sdk import copied
from tests.support import base_config, chat, gateway_in_process, mock_backend, spawn_gateway


async def test_the_quickstart_mock_is_steered_and_released_through_the_gateway(tmp_path):
    proc = spawn_gateway(copied(tmp_path), cwd=tmp_path, wait_for="demo key:")
    try:
        key = next(m.group(1) for line in proc.lines if (m := re.search(r"demo key: (\S+)", line)))
        auth = {"authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(base_url=proc.url, timeout=10) as client:
            sized = await client.post("/v1/chat/completions", json=chat(), headers={**auth, "x-mock-tokens": "3"})
            assert sized.status_code == 200 and sized.json()["usage"]["completion_tokens"] == 3
            held = asyncio.ensure_future(client.post("/v1/chat/completions", json=chat(),
                                                     headers={**auth, "x-mock-hold": "demo"}))
            for _ in range(200):
                stats = (await client.get("/_mock/stats")).json()
                if stats["held"] == 1:
                    break
                await asyncio.sleep(0.02)
            assert stats["held"] == 1 and not held.done()
            released = await client.post("/_mock/release", json={"name": "demo"})
            assert released.status_code == 200 and released.json() == {"released": 1}
            assert (await held).status_code == 200
    finally:
        proc.stop()


async def test_without_a_builtin_mock_its_controls_are_not_served():
    async with mock_backend() as mock, gateway_in_process(base_config(mock.url)) as gw:
        async with gw.client() as client:
            denied = await client.post(gw.url + "/_mock/release", json={"name": "x"})
            assert denied.status_code == 404 and denied.json()["error"]["code"] == "route_denied"
            assert denied.headers["x-tokenward-reason"] == "route_denied"
