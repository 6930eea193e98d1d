"""TLS on both sides, and config reload without a restart.

- The listener over HTTPS (server.tls), checked against the CA that signed it.
- Upstreams over HTTPS with the operator's CA bundle (ca_file) and a client certificate
  for a backend that demands one (mutual TLS); without them the backend is unreachable.
- SIGHUP and POST /admin/reload swap plans, tenants, models and screening for new requests
  while an open stream carries on to its end; a broken new config is refused and the
  running one keeps serving.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest
import yaml

from tests.fixtures.certs import issue, make_ca
from tests.fixtures.processes import stop_process
from tests.support import gateway_in_process
from tokenward.http.serving import HttpServer
from tokenward.mock.app import MockUpstream

pytestmark = pytest.mark.usefixtures("sdk_clients_closed")   # tests/conftest.py

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pki")
    ca, ca_cert, ca_key = make_ca(folder)
    return {"ca": ca, "server": issue(folder, "server", ca_cert, ca_key),
            "client": issue(folder, "client", ca_cert, ca_key, client=True)}


class Serving:
    """``python -m tokenward serve`` on a port the OS picks; its output kept."""

    def __init__(self, config: Path, cwd: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "tokenward", "serve", "--config", str(config),
                                      "--port", "0"], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, env={**os.environ, "TW_ADMIN": "admin-secret"})
        self.lines: list[str] = []
        deadline = time.monotonic() + 30
        self.url = None
        while time.monotonic() < deadline and self.url is None:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            match = re.search(r"listening on (https?://\S+)", line)
            if match:
                self.url = match.group(1)
        if self.url is None:
            self.stop()
            raise RuntimeError("did not start: " + "".join(self.lines))
        import threading

        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        for line in iter(self.proc.stdout.readline, ""):
            self.lines.append(line)

    def stop(self) -> None:
        stop_process(self.proc)


def write_config(path: Path, mock_url: str, **extra) -> Path:
    raw = {
        "upstreams": {"mock": {"base_url": mock_url, "forward_headers": ["x-mock-*"]}},
        "models": {"small-chat": {"upstream": "mock"}},
        "plans": {"team": {"models": ["small-chat"], "max_output_tokens": 64}},
        "tenants": {"acme": {"plan": "team"}},
        "keystore": {"url": "sqlite:///keys.db"},
        "logging": {"decisions": "off", "level": "info"},
        "admin": {"token_env": "TW_ADMIN"},
        **extra,
    }
    path.write_text(yaml.safe_dump(raw))
    return path


def create_key(config: Path) -> str:
    out = subprocess.run([sys.executable, "-m", "tokenward", "keys", "create", "--config", str(config),
                          "--tenant", "acme"], capture_output=True, text=True, check=True)
    return out.stdout.strip()


async def test_the_listener_speaks_tls(pki, tmp_path):
    async with mock_server() as (mock, port):
        config = write_config(tmp_path / "gw.yaml", f"http://127.0.0.1:{port}/v1",
                              server={"tls": {"cert_file": str(pki["server"].cert),
                                              "key_file": str(pki["server"].key)}})
        key = create_key(config)
        gateway = await asyncio.to_thread(Serving, config, tmp_path)
        try:
            assert gateway.url.startswith("https://")
            async with httpx.AsyncClient(verify=str(pki["ca"].cert)) as http:
                assert (await http.get(gateway.url + "/healthz")).status_code == 200
                client = openai.AsyncOpenAI(base_url=gateway.url + "/v1", api_key=key, http_client=http,
                                            max_retries=0)
                reply = await client.chat.completions.create(model="small-chat", max_tokens=4,
                                                             messages=[{"role": "user", "content": "hi"}])
                assert reply.choices[0].message.content
            with pytest.raises(httpx.HTTPError):     # a client that does not trust the CA
                async with httpx.AsyncClient() as untrusting:
                    await untrusting.get(gateway.url + "/healthz")
        finally:
            gateway.stop()


class mock_server:
    """The mock backend under the gateway's own HTTP server, optionally over TLS."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None) -> None:
        self.ssl_context = ssl_context

    async def __aenter__(self):
        self.app = MockUpstream()

        async def app(scope, receive, send):
            if scope["type"] == "lifespan":
                while True:
                    message = await receive()
                    kind = message["type"].rsplit(".", 1)[1]
                    await send({"type": f"lifespan.{kind}.complete"})
                    if kind == "shutdown":
                        return
            await self.app(scope, receive, send)

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        self.server = HttpServer(app, graceful_s=1.0)
        await self.server.start([sock], self.ssl_context)
        return self.app, sock.getsockname()[1]

    async def __aexit__(self, *exc) -> None:
        await self.server.stop(graceful=False)


@pytest.mark.parametrize("ca,client_cert,expect", [
    (True, True, 200),      # trusted and presenting its certificate
    (False, True, 502),     # the backend's certificate is not trusted
    (True, False, 502),     # the backend demands a client certificate
])
async def test_upstream_tls_with_a_ca_bundle_and_a_client_certificate(pki, tmp_path, ca, client_cert, expect):
    demanding = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    demanding.load_cert_chain(pki["server"].cert, pki["server"].key)
    demanding.load_verify_locations(pki["ca"].cert)
    demanding.verify_mode = ssl.CERT_REQUIRED
    async with mock_server(demanding) as (mock, port):
        upstream = {"base_url": f"https://127.0.0.1:{port}/v1"}
        if ca:
            upstream["ca_file"] = str(pki["ca"].cert)
        if client_cert:
            upstream |= {"client_cert_file": str(pki["client"].cert), "client_key_file": str(pki["client"].key)}
        raw = yaml.safe_load(write_config(tmp_path / "gw.yaml", "http://unused/v1").read_text())
        raw["upstreams"]["mock"] = upstream
        raw["keystore"]["url"] = f"sqlite:///{tmp_path}/keys.db"
        async with gateway_in_process(yaml.safe_dump(raw)) as gw:
            async with gw.client() as http:
                resp = await http.post(gw.url + "/v1/chat/completions", json={
                    "model": "small-chat", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]})
        assert resp.status_code == expect, resp.text
        assert mock.stats.requests == (1 if expect == 200 else 0)


async def test_reload_swaps_the_config_and_an_open_stream_carries_on(tmp_path):
    async with mock_server() as (mock, port):
        config = write_config(tmp_path / "gw.yaml", f"http://127.0.0.1:{port}/v1")
        key = create_key(config)
        gateway = await asyncio.to_thread(Serving, config, tmp_path)
        try:
            client = openai.AsyncOpenAI(base_url=gateway.url + "/v1", api_key=key, max_retries=0)
            # a stream of 40 tokens at 20/s: two seconds, across the reload
            stream = await client.chat.completions.create(
                model="small-chat", max_tokens=40, stream=True, messages=[{"role": "user", "content": "hi"}],
                extra_headers={"x-mock-token-rate": "20", "x-mock-tokens": "40"})
            chunks = 0
            async for _ in stream:
                chunks += 1
                if chunks == 5:
                    raw = yaml.safe_load(config.read_text())
                    raw["models"]["new-chat"] = {"upstream": "mock"}
                    raw["plans"]["team"]["models"].append("new-chat")
                    raw["plans"]["team"]["max_output_tokens"] = 8
                    config.write_text(yaml.safe_dump(raw))
                    gateway.proc.send_signal(signal.SIGHUP)
                    await wait_for_line(gateway, "config reloaded")
            assert chunks >= 40                    # the open stream ran to its end
            reply = await client.chat.completions.create(model="new-chat", max_tokens=50,
                                                         messages=[{"role": "user", "content": "hi"}])
            assert reply.usage.completion_tokens <= 8   # the new plan's clamp
            # a broken config is refused; the running one keeps serving
            config.write_text(config.read_text().replace("max_output_tokens: 8", "max_output_tokens: -3"))
            async with httpx.AsyncClient() as http:
                refused = await http.post(gateway.url + "/admin/reload",
                                          headers={"authorization": "Bearer admin-secret"})
                assert refused.status_code == 409
                assert "plans.team.max_output_tokens: must be >= 0" in refused.json()["error"]["message"]
            again = await client.chat.completions.create(model="new-chat", max_tokens=50,
                                                         messages=[{"role": "user", "content": "hi"}])
            assert again.choices
            # and the admin route reloads a good one
            config.write_text(config.read_text().replace("max_output_tokens: -3", "max_output_tokens: 16"))
            async with httpx.AsyncClient() as http:
                done = await http.post(gateway.url + "/admin/reload", headers={"authorization": "Bearer admin-secret"})
            assert done.status_code == 200 and "models" in done.json()["reloaded"]
        finally:
            gateway.stop()


async def wait_for_line(gateway: Serving, text: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not any(text in line for line in gateway.lines):
        if time.monotonic() > deadline:
            raise AssertionError(f"no {text!r} in: {''.join(gateway.lines)[-2000:]}")
        await asyncio.sleep(0.05)
