"""A gateway with abuse signals on, driven with an injected clock; the engine's batches are
flushed by the test, so every step is deterministic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.control.conftest import Clock, gateway, write_config  # noqa: F401

DAY = 86400
# A Monday 00:00 UTC a little after now, so Redis TTLs computed from it lie ahead.
T0 = float((int(__import__("time").time()) // (7 * DAY) + 1) * 7 * DAY + 4 * DAY)


def abuse_config(tmp_path: Path, backend_port: int, shadow: bool | None, store: dict | None = None,
                 **abuse: Any) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    sections: dict[str, Any] = {}
    if shadow is not None:
        sections["abuse"] = {"shadow": shadow, "network_header": "x-forwarded-for", "batch_s": 3600, **abuse}
    if store is not None:
        sections["store"] = store
    return write_config(tmp_path, backend_port, **sections)


def essentials(resp: httpx.Response) -> tuple:
    """What a response says, without its per-call ids and timestamps."""
    try:
        body = resp.json()
    except ValueError:
        return resp.status_code, resp.text
    if "choices" in body:
        return resp.status_code, body["choices"], body.get("usage")
    return resp.status_code, body


async def observed(engine, count: int, timeout: float = 5.0) -> None:
    """Wait until the engine's buffer holds ``count`` decisions: a request's decision is
    recorded after its response is sent, once its stages are released (a reduced key gives
    its slot back to Redis first), so the client can be told before the record exists."""
    import asyncio
    import time

    deadline = time.monotonic() + timeout
    while len(engine.observer.buffer) < count:
        assert time.monotonic() < deadline, f"{len(engine.observer.buffer)} of {count} decisions observed"
        await asyncio.sleep(0.002)
