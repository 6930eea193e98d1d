"""The status page's rows for an upstream's targets: what this replica has in flight on each,
which it has ejected, their probes (upstream/pool.py ``snapshot``)."""

from __future__ import annotations

import asyncio
import socket

from .conftest import ADMIN, bearer, chat, gateway, write_config


def _dead_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


async def test_the_status_page_shows_each_target_its_work_and_its_ejection(tmp_path, backend):
    dead = _dead_port()
    pool = {"targets": [{"url": f"http://127.0.0.1:{dead}/v1", "max_inflight_requests": 4},
                        {"url": backend.url, "weight": 2}],
            "forward_headers": ["x-mock-*"], "eject_after": 1, "eject_base_s": 30, "health_path": None}
    async with gateway(write_config(tmp_path, backend.port, upstreams={"local": pool})) as gw:
        key = bearer(await gw.new_key())
        held = asyncio.ensure_future(gw.client.post("/v1/chat/completions", json=chat(max_tokens=50),
                                                    headers={**key, "x-mock-hold": "status"}))
        await backend.wait_held(1)
        for _ in range(3):
            assert (await gw.client.post("/v1/chat/completions", json=chat(), headers=key)).status_code == 200
        data = (await gw.client.get("/admin/status.json", headers=ADMIN)).json()
        html = (await gw.client.get("/admin/status", headers=ADMIN)).text
        await backend.release("status")
        assert (await held).status_code == 200
    rows = {row["target"]: row for row in data["upstreams"]["local"]["targets"]}
    down, up = rows[f"127.0.0.1:{dead}"], rows[f"127.0.0.1:{backend.port}"]
    assert down["up"] is False and down["ejected_for_s"] > 0 and down["last_failure"] == "unreachable"
    assert down["max_inflight_requests"] == 4 and down["inflight_requests"] == 0
    assert up["up"] is True and up["inflight_requests"] == 1 and up["inflight_tokens"] > 50 and up["weight"] == 2
    assert data["upstreams"]["local"]["failovers"] >= 1
    assert "Upstream targets (this replica)" in html and f"127.0.0.1:{dead}" in html and "ejected for" in html
