"""Fixtures for operator controls and abuse actions: a real gateway in this process (an
injectable clock), the real mock backend, a real redis-server; helpers that read the audit."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import httpx
import pytest

from tests.fixtures.redis_server import redis_server, redis_server_session  # noqa: F401
from tests.identity.conftest import ADMIN_TOKEN, ADMIN_TOKEN_ENV, Backend, backend, bearer, chat, write_config  # noqa: F401
from tests.budget.conftest import FakeClock
from tests.support import start_app, stop_app
from tokenward.app import Gateway
from tokenward.config.loader import parse_config
from tokenward.assemble.gateway import Parts

ADMIN = {"authorization": f"Bearer {ADMIN_TOKEN}"}


Clock = FakeClock   # unix seconds, moved only by the test


class Running:
    def __init__(self, gateway: Gateway, port: int, client: httpx.AsyncClient) -> None:
        self.gateway = gateway
        self.url = f"http://127.0.0.1:{port}"
        self.client = client

    @property
    def parts(self) -> Parts:
        return self.gateway.parts

    async def new_key(self, tenant: str = "acme") -> str:
        plaintext, _ = await self.parts.keys.create(tenant)
        return plaintext

    async def admin(self, path: str, body: dict | None = None) -> httpx.Response:
        if body is None:
            return await self.client.get(path, headers=ADMIN)
        return await self.client.post(path, json=body, headers=ADMIN)

    async def audit(self) -> list[dict]:
        return (await self.admin("/admin/audit")).json()["data"]


@contextlib.asynccontextmanager
async def gateway(config_path: Path, clock: Callable[[], float] | None = None,
                  environ: dict[str, str] | None = None) -> AsyncIterator[Running]:
    env = {**os.environ, ADMIN_TOKEN_ENV: ADMIN_TOKEN, **(environ or {})}
    config = parse_config(config_path.read_text(), env)
    gw = Gateway(config, clock=clock)
    old = os.environ.get(ADMIN_TOKEN_ENV)
    os.environ[ADMIN_TOKEN_ENV] = ADMIN_TOKEN
    try:
        server, port = await start_app(gw)
    finally:
        if old is None:
            os.environ.pop(ADMIN_TOKEN_ENV, None)
        else:
            os.environ[ADMIN_TOKEN_ENV] = old
    client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10.0)
    try:
        yield Running(gw, port, client)
    finally:
        await client.aclose()
        await stop_app(server)


async def refused(resp: httpx.Response, status: int, code: str, backend: Backend, before: int) -> dict:
    """The house rule: status, reason code, and the backend never saw it."""
    assert resp.status_code == status, resp.text
    error = resp.json()["error"]
    assert error["code"] == code, error
    assert await backend.requests() == before, "a refused request reached the backend"
    return error


def tools_chat(**extra: Any) -> dict:
    return chat(tools=[{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}],
                **extra)
