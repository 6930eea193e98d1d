"""A real gateway (identity, entitlement, validation, work, admission, forward) over loopback,
in this process or as ``python -m tokenward serve`` processes, against the real mock backend."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Sequence

import httpx

from tests.fixtures.processes import stop_process
import orjson
import yaml

from tests import support
from tests.support import start_app, stop_app
from tokenward.app import Gateway
from tokenward.budget.limits import tenant_namespace
from tokenward.config.loader import parse_config
from tokenward.stages.order import Builder

ROOT = Path(__file__).resolve().parents[2]


def budget_config(tmp_path: Path, mock_port: int, store_url: str = "memory", *, tpm: int = 3000,
                  max_output: int = 200, streams: int = 100, lease_s: float = 30.0, **sections: Any) -> Path:
    raw: dict[str, Any] = {
        "upstreams": {"mock": {"base_url": f"http://127.0.0.1:{mock_port}/v1", "forward_headers": ["x-mock-*"],
                               "read_timeout_s": 10}},
        "models": {"small-chat": {"upstream": "mock", "context_window": 32768,
                                  "input_price_per_million": 1.0, "output_price_per_million": 2.0}},
        "plans": {"team": {"models": ["small-chat"], "max_output_tokens": max_output, "tokens_per_minute": tpm,
                           "requests_per_minute": 100_000, "max_concurrent_streams": streams}},
        "tenants": {"acme": {"plan": "team"}},
        "keystore": {"url": f"sqlite:///{tmp_path}/keys.db"},
        "store": {"url": store_url, "timeout_ms": 200, "lease_s": lease_s},
        "stream": {"idle_timeout_s": 1.0, "max_duration_s": 20},
        "logging": {"decisions": str(tmp_path / "decisions.jsonl"), "level": "warning"},
    }
    for name, value in sections.items():
        raw[name] = {**raw.get(name, {}), **value} if isinstance(value, dict) else value
    path = tmp_path / "tokenward.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def chat(content: str = "hi", max_tokens: int = 100_000, **extra: Any) -> dict:
    """tests/support.py's chat, asking for more than any plan allows (the gateway clamps it)."""
    return support.chat(content=content, max_tokens=max_tokens, **extra)


Backend = support.MockBackend
backend = support.mock_backend


class InProcess:
    def __init__(self, gateway: Gateway, port: int, decisions: Path) -> None:
        self.gateway = gateway
        self.url = f"http://127.0.0.1:{port}"
        self.decisions_path = decisions
        self.client = httpx.AsyncClient(base_url=self.url, timeout=15.0, limits=httpx.Limits(max_connections=200))

    @property
    def admitter(self):
        return self.gateway.parts.budget

    @property
    def metrics(self):
        """This gateway's own request metrics (observe/metrics.py), zero at its start."""
        return self.gateway.parts.metrics

    @property
    def store(self):
        return self.admitter.shared.store

    async def new_key(self, tenant: str = "acme") -> dict[str, str]:
        plaintext, _ = await self.gateway.parts.keys.create(tenant)
        return {"authorization": f"Bearer {plaintext}"}

    def decisions(self) -> list[dict]:
        self.gateway.parts.decisions.flush()
        if not self.decisions_path.exists():
            return []
        return [orjson.loads(line) for line in self.decisions_path.read_bytes().splitlines() if line]

    async def wait_decisions(self, count: int, timeout: float = 5.0) -> list[dict]:
        """The decision records, once ``count`` are written (a record follows the response)."""
        deadline = time.monotonic() + timeout
        while len(records := self.decisions()) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"only {len(records)} decision records")
            await asyncio.sleep(0.01)
        return records

    async def settled(self, tenant: str = "acme", timeout: float = 5.0) -> None:
        """Wait until nothing is held: no open ticket here, no lease and no slot in the store."""
        ns = tenant_namespace("tw", tenant)
        deadline = time.monotonic() + timeout
        while True:
            open_here = len(self.admitter.keeper.open)
            leases = await self.store.open_reservations(ns + ":leases")
            slots = await self.store.value(ns + ":g:streams")
            if open_here == 0 and leases == 0 and slots is None:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"still held: tickets={open_here} leases={leases} slots={slots}")
            await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def in_process(config_path: Path, clock: Callable[[], float] | None = None,
                     stages: Sequence[tuple[str, Builder]] | None = None) -> AsyncIterator[InProcess]:
    config = parse_config(config_path.read_text(), environ={})
    gateway = Gateway(config, clock=clock, stages=stages)
    server, port = await start_app(gateway)
    running = InProcess(gateway, port, Path(config.logging.decisions))
    try:
        yield running
    finally:
        await running.client.aclose()
        await stop_app(server)


class Process:
    def __init__(self, proc: subprocess.Popen, url: str) -> None:
        self.proc = proc
        self.url = url

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def stop(self) -> None:
        stop_process(self.proc)


def spawn(config_path: Path, env: dict[str, str] | None = None, timeout: float = 30.0) -> Process:
    """``python -m tokenward serve --config F --port 0``; returns once it listens and is ready."""
    proc = subprocess.Popen([sys.executable, "-m", "tokenward", "serve", "--config", str(config_path), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, **(env or {})})
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "listening on" not in line:
        proc.kill()
        raise RuntimeError(f"gateway did not start: {line!r}")
    url = line.split("listening on ", 1)[1].strip()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                return Process(proc, url)
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("gateway never became ready")


def create_key(config_path: Path, tenant: str = "acme") -> dict[str, str]:
    """``tokenward keys create``: the plaintext key is the one line on stdout."""
    out = subprocess.run([sys.executable, "-m", "tokenward", "keys", "create", "--config", str(config_path),
                          "--tenant", tenant], capture_output=True, text=True, check=True, timeout=60)
    return {"authorization": f"Bearer {out.stdout.strip()}"}
