"""Fixtures for identity and entitlement: a real gateway in-process over loopback, a mock
backend that counts what reaches it, a real redis-server and a real PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
from pathlib import Path
from typing import Any, AsyncIterator

import httpx
import pytest
import yaml

from tests.fixtures.postgres_server import postgres_server  # noqa: F401
from tests.fixtures.redis_server import redis_server, redis_server_session  # noqa: F401
from tokenward.app import Gateway
from tokenward.config.loader import parse_config
from tokenward.mock import start_mock, stop_mock
from tests.support import MockBackend, chat, mock_backend, start_app, stop_app  # noqa: F401 (chat: re-exported)

ADMIN_TOKEN_ENV = "TW_TEST_ADMIN_TOKEN"
ADMIN_TOKEN = "admin-secret-for-tests-0123456789"

BASE_CONFIG: dict[str, Any] = {
    "upstreams": {"local": {"base_url": "http://127.0.0.1:1/v1", "forward_headers": ["x-mock-*"]}},
    "models": {
        "small-chat": {"upstream": "local", "context_window": 32768},
        "large-chat": {"upstream": "local", "context_window": 131072},
    },
    "plans": {
        "team": {
            "models": ["small-chat", "large-chat"], "max_output_tokens": 8192,
            "allow_system_prompt": True, "allow_tools": ["search", "calculator"],
            "allow_files": ["application/pdf", "text/plain"], "max_n": 4,
            "tokens_per_minute": 400000, "requests_per_minute": 600,
        },
        "free": {
            "models": ["small-chat"], "max_output_tokens": 512, "allow_system_prompt": False,
            "system_prompt": "You are a helpful assistant.", "allow_tools": [], "max_tools": 0,
            "tokens_per_minute": 20000, "requests_per_minute": 30,
        },
        "locked": {"models": ["small-chat"], "allow_system_prompt": False},
        "research": {
            "models": ["small-chat", "large-chat"], "allow_best_of": True, "max_best_of": 4,
            "features": ["structured_output", "logprobs", "vllm_extensions"],
        },
    },
    "tenants": {
        "acme": {"plan": "team"},
        "globex": {"plan": "free"},
        "initech": {"plan": "locked"},
        "umbrella": {"plan": "research"},
    },
    "admin": {"token_env": ADMIN_TOKEN_ENV},
}


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def write_config(tmp_path: Path, mock_port: int, **sections: Any) -> Path:
    raw = copy.deepcopy(BASE_CONFIG)
    raw["upstreams"]["local"]["base_url"] = f"http://127.0.0.1:{mock_port}/v1"
    raw["keystore"] = {"url": f"sqlite:///{tmp_path}/keys.db"}
    raw["logging"] = {"decisions": str(tmp_path / "decisions.jsonl")}
    for name, value in sections.items():
        if isinstance(value, dict) and isinstance(raw.get(name), dict):
            raw[name] = {**raw[name], **value}
        else:
            raw[name] = value
    path = tmp_path / "tokenward.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


class RunningGateway:
    def __init__(self, gateway: Gateway, server: Any, port: int, client: httpx.AsyncClient,
                 config_path: Path) -> None:
        self.gateway = gateway
        self.server = server
        self.port = port
        self.client = client
        self.config_path = config_path

    @property
    def keys(self):
        return self.gateway.parts.keys

    @property
    def identity(self):
        return self.gateway.parts.identity

    async def new_key(self, tenant: str = "acme", **kwargs: Any) -> str:
        plaintext, _ = await self.keys.create(tenant, **kwargs)
        return plaintext

    async def post(self, path: str, body: Any, headers: dict[str, str] | None = None) -> httpx.Response:
        return await self.client.post(path, json=body, headers=headers or {})

    async def stop(self) -> None:
        await self.client.aclose()
        await stop_app(self.server)


@contextlib.asynccontextmanager
async def run_gateway(config_path: Path, environ: dict[str, str] | None = None) -> AsyncIterator[RunningGateway]:
    env = {**os.environ, ADMIN_TOKEN_ENV: ADMIN_TOKEN, **(environ or {})}
    config = parse_config(config_path.read_text(), env)
    gateway = Gateway(config)
    old = os.environ.get(ADMIN_TOKEN_ENV)
    os.environ[ADMIN_TOKEN_ENV] = env[ADMIN_TOKEN_ENV]
    try:
        server, port = await start_app(gateway)
    finally:
        if old is None:
            os.environ.pop(ADMIN_TOKEN_ENV, None)
        else:
            os.environ[ADMIN_TOKEN_ENV] = old
    client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10.0)
    running = RunningGateway(gateway, server, port, client, config_path)
    try:
        yield running
    finally:
        await running.stop()


Backend = MockBackend


@pytest.fixture
async def backend() -> AsyncIterator[MockBackend]:
    async with mock_backend() as running:
        yield running


@pytest.fixture
async def gw(tmp_path, backend) -> AsyncIterator[RunningGateway]:
    async with run_gateway(write_config(tmp_path, backend.port)) as running:
        yield running


async def assert_refused(resp: httpx.Response, status: int, code: str, backend: Backend, before: int,
                         param: str | None = None) -> dict:
    assert resp.status_code == status, resp.text
    error = resp.json()["error"]
    assert error["code"] == code, error
    if param is not None:
        assert error["param"] == param, error
    assert await backend.requests() == before, "a refused request reached the backend"
    return error


@pytest.fixture
def backend_process():
    """A mock backend in its own thread and loop, for tests that drive gateways as processes."""
    import threading

    ready = threading.Event()
    holder: dict[str, Any] = {}

    def serve() -> None:
        loop = asyncio.new_event_loop()
        holder["loop"] = loop

        async def main() -> None:
            server, port, _ = await start_mock("127.0.0.1", 0)
            holder["port"], holder["server"] = port, server
            holder["stop"] = asyncio.Event()
            ready.set()
            await holder["stop"].wait()
            await stop_mock(server)

        loop.run_until_complete(main())
        loop.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        yield holder["port"]
    finally:
        holder["loop"].call_soon_threadsafe(holder["stop"].set)
        thread.join(10)
