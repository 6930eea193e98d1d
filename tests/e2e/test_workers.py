"""Several workers on one port: each its own SO_REUSEPORT socket, so the kernel spreads new
connections over them (one shared socket let whichever process woke first take them)."""

from __future__ import annotations

import asyncio

import httpx

from tests.e2e.test_tls_reload import Serving, create_key, mock_server, write_config


async def test_two_workers_each_take_connections(tmp_path):
    async with mock_server() as (mock, port):
        config = write_config(tmp_path / "gw.yaml", f"http://127.0.0.1:{port}/v1",
                              server={"workers": 2})
        key = create_key(config)
        gateway = await asyncio.to_thread(Serving, config, tmp_path)
        try:
            prefixes = set()
            for _ in range(40):   # a new connection each time: the kernel picks a worker's socket
                async with httpx.AsyncClient() as http:
                    resp = await http.post(gateway.url + "/v1/chat/completions", headers={
                        "authorization": f"Bearer {key}"}, json={
                        "model": "small-chat", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]})
                assert resp.status_code == 200
                prefixes.add(resp.headers["x-request-id"][:12])   # req_ + the worker's own prefix
            assert len(prefixes) == 2, prefixes
        finally:
            gateway.stop()
