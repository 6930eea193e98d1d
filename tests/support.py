"""Shared test helpers: a real mock backend and a real gateway on loopback ports the OS picks."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import tempfile
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import httpx

from tests.fixtures.processes import stop_process
import uvicorn

from tokenward.app import Gateway
from tokenward.config import parse_config
from tokenward.http.serving import HttpServer
from tokenward.mock.server import _EmbeddedServer, bind_socket, start_mock, stop_mock

ROOT = Path(__file__).resolve().parent.parent

BASE_CONFIG = """
upstreams:
  mock:
    base_url: {mock_url}
    forward_headers: ["x-mock-*"]
    read_timeout_s: 10
models:
  small-chat: {{upstream: mock, context_window: 32768, serves: [chat, completions, embeddings]}}
  large-chat: {{upstream: mock, upstream_model: big-backend-model, context_window: 131072}}
plans:
  team: {{models: [small-chat, large-chat], max_output_tokens: 4096}}
tenants:
  acme: {{plan: team}}
logging: {{decisions: "{decisions}"}}
keystore: {{url: "sqlite:///{keystore}"}}
"""


class MockBackend:
    """The bundled mock backend, in this test's loop, with what tests read from it: its
    counters (``/_mock/stats``), the last body it received, held requests. The one backend
    wrapper every gateway test uses (``mock_backend()``, and the ``backend`` fixtures)."""

    def __init__(self, port: int, app: Any = None, server: Any = None) -> None:
        self.port = port
        self.app = app
        self.server = server
        self.client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10.0)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def stats(self) -> dict[str, Any]:
        return (await self.client.get("/_mock/stats")).json()

    async def requests(self) -> int:
        """Requests for work; a gateway's readiness probes (GET /v1/models) are not work."""
        stats = await self.stats()
        return stats["requests"] - stats["by_path"].get("/v1/models", 0)

    async def last_body(self) -> Any:
        return (await self.stats())["last_request"]["body"]

    async def release(self, name: str) -> int:
        return (await self.client.post("/_mock/release", json={"name": name})).json()["released"]

    async def wait_held(self, count: int, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while (await self.stats())["held"] < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"backend never held {count}: {await self.stats()}")
            await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def mock_backend() -> AsyncIterator[MockBackend]:
    server, port, app = await start_mock("127.0.0.1", 0)
    backend = MockBackend(port, app, server)
    try:
        yield backend
    finally:
        await backend.client.aclose()
        await stop_mock(server)


@dataclass
class RunningGateway:
    url: str
    gateway: Gateway
    server: Any
    decisions_path: Path | None = None
    key: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def metrics(self) -> Any:
        """This gateway's own request metrics (observe/metrics.py), zero at its start."""
        return self.gateway.parts.metrics

    @property
    def auth(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.key}"}

    def client(self, **kwargs: Any) -> httpx.AsyncClient:
        """An HTTP client that sends this gateway's test key."""
        return httpx.AsyncClient(headers=self.auth, timeout=kwargs.pop("timeout", 10), **kwargs)

    async def new_key(self, tenant: str = "acme", **kwargs: Any) -> str:
        plaintext, _ = await self.gateway.parts.keys.create(tenant, **kwargs)
        return plaintext

    def decisions(self) -> list[dict]:
        import orjson

        assert self.decisions_path is not None
        self.gateway.parts.decisions.flush()
        if not self.decisions_path.exists():
            return []
        return [orjson.loads(line) for line in self.decisions_path.read_bytes().splitlines() if line]


def base_config(mock_url: str, decisions: str = "off", extra: str = "") -> str:
    keystore = os.path.join(tempfile.mkdtemp(prefix="tw-keys-"), "keys.db")
    return BASE_CONFIG.format(mock_url=mock_url, decisions=decisions, keystore=keystore) + extra


async def start_app(app: Any, http: str = "tokenward") -> tuple[Any, int]:
    """Serve an ASGI app in this event loop on a port the OS picks; return once it accepts.

    ``http="tokenward"``: the gateway's own server (what ``tokenward serve`` runs);
    ``http="uvicorn"``: plain uvicorn, for the paths any other ASGI server takes.
    """
    sock = bind_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    if http == "tokenward":
        sock.listen(2048)
        edge = getattr(getattr(app, "config", None), "edge", None)
        limits = {"max_header_bytes": edge.max_header_bytes, "max_headers": edge.max_headers} if edge else {}
        server = HttpServer(app, keep_alive_s=30.0, graceful_s=5.0, **limits)
        await server.start([sock])
        return server, port
    server = _EmbeddedServer(uvicorn.Config(app, loop="asyncio", http="httptools", lifespan="on",
                                            access_log=False, log_level="warning", log_config=None))
    server.task = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started:
        if server.task.done():
            server.task.result()
            raise RuntimeError("server exited during start-up")
        await asyncio.sleep(0.002)
    return server, port


async def stop_app(server: Any) -> None:
    """Stop a server from ``start_app``; requests still open are cut off."""
    if isinstance(server, HttpServer):
        await server.stop(graceful=False)
        return
    server.should_exit = True
    for conn in list(server.server_state.connections):
        transport = getattr(conn, "transport", None)
        if transport is not None:
            transport.abort()
    await server.task


@contextlib.asynccontextmanager
async def gateway_in_process(config_text: str, decisions_path: Path | None = None,
                             http: str = "tokenward") -> AsyncIterator[RunningGateway]:
    """A gateway in this event loop; ``http="uvicorn"`` runs it without the disconnect hook."""
    gateway = Gateway(parse_config(config_text, environ={}))
    server, port = await start_app(gateway, http)
    running = RunningGateway(f"http://127.0.0.1:{port}", gateway, server, decisions_path)
    if gateway.config.tenants and gateway.parts.keys is not None:
        running.key = await running.new_key(next(iter(gateway.config.tenants)))
    try:
        yield running
    finally:
        await stop_app(server)


@dataclass
class GatewayProcess:
    proc: subprocess.Popen
    url: str
    lines: list[str]

    def stop(self) -> None:
        stop_process(self.proc)


def spawn_gateway(config_path: Path | str, env: dict[str, str] | None = None, cwd: Path | None = None,
                  wait_for: str | None = None, timeout: float = 30.0, args: tuple[str, ...] = (),
                  preexec_fn: Callable[[], None] | None = None) -> GatewayProcess:
    """``python -m tokenward serve --port 0``; returns once it listens (and ``wait_for`` was printed)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenward", "serve", "--config", str(config_path), "--port", "0", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd,
        env={**os.environ, **(env or {})}, preexec_fn=preexec_fn)
    lines: list[str] = []
    url = None
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        match = re.search(r"listening on (http://\S+)", line)
        if match:
            url = match.group(1)
        if url and (wait_for is None or any(wait_for in item for item in lines)):
            break
    if url is None or proc.poll() is not None:
        proc.kill()
        raise RuntimeError("gateway did not start:\n" + "\n".join(lines))
    handle = GatewayProcess(proc, url, lines)
    _wait_ready(url, deadline)
    return handle


def _wait_ready(url: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"gateway at {url} never became ready")


def chat(model: str = "small-chat", content: Any = "hello there", max_tokens: int | None = 8, **extra: Any) -> dict:
    """A chat-completions body with one user message (``max_tokens=None`` sends a null).
    The one chat helper of the suite; others are this with their own defaults."""
    return {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens, **extra}
