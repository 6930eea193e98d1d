"""A real mock upstream on an ephemeral port for every test, plus small raw-HTTP helpers."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Callable

import httpx
import orjson
import pytest

from tokenward.mock import MockUpstream, start_mock, stop_mock


@dataclass
class Mock:
    port: int
    app: MockUpstream
    client: httpx.AsyncClient

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def stats(self) -> dict[str, Any]:
        resp = await self.client.get("/_mock/stats")
        resp.raise_for_status()
        return resp.json()

    async def wait_stats(self, pred: Callable[[dict], bool], timeout: float = 2.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            stats = await self.stats()
            if pred(stats):
                return stats
            if time.monotonic() > deadline:
                raise AssertionError(f"stats never matched: {stats}")
            await asyncio.sleep(0.01)

    async def raw(self, path: str, body: Any, headers: dict[str, str] | None = None):
        """Send a request over a bare socket, so a test controls exactly when it hangs up."""
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        data = orjson.dumps(body)
        head = f"POST {path} HTTP/1.1\r\nhost: mock\r\ncontent-type: application/json\r\n"
        head += f"content-length: {len(data)}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        writer.write(head.encode() + b"\r\n" + data)
        await writer.drain()
        return reader, writer


@pytest.fixture
async def mock():
    server, port, app = await start_mock()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5.0) as client:
        try:
            yield Mock(port, app, client)
        finally:
            await stop_mock(server)
