"""``tokenward routes --config F`` against a gateway started with the same config: every
method and path it lists is listed once and answered by what it names (never route_denied
or method_not_allowed; a pipeline route with a well-formed body gets a 2xx), and a method or
path it does not list is not answered (route_denied or method_not_allowed)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import httpx

from tests.support import ROOT, chat, mock_backend, start_app, stop_app
from tokenward.app import Gateway
from tokenward.config.loader import parse_config

TOKEN = "routes-table-admin-token"
ADMIN = {"authorization": f"Bearer {TOKEN}"}
NOT_SERVED = {"route_denied", "method_not_allowed"}

BODIES = {
    "/v1/chat/completions": chat(),
    "/v1/completions": {"model": "small-chat", "prompt": "hello", "max_tokens": 8},
    "/v1/embeddings": {"model": "small-chat", "input": "hello"},
    "/v1/responses": {"model": "small-chat", "input": "hello", "max_output_tokens": 16},
    "/v1/messages": {"model": "small-chat", "max_tokens": 16, "messages": [{"role": "user", "content": "hello"}]},
    "/v1/messages/count_tokens": {"model": "small-chat", "messages": [{"role": "user", "content": "hello"}]},
    "/v1/jobs": {"max_tokens": 1000},
}


def _config_text(tmp_path, mock_url: str) -> str:
    text = (ROOT / "examples" / "gateway.yaml").read_text()
    text = text.replace("http://127.0.0.1:9100/v1", mock_url)
    text = text.replace("sqlite:///tokenward-keys.db", f"sqlite:///{tmp_path}/keys.db")
    text = text.replace("  decisions: stdout", "  decisions: off")
    text = text.replace("  expose_metrics: false", "  expose_metrics: true")
    return text + "\ncache:\n  store: memory\n"


def _listed(config_path) -> list[tuple[str, str, str]]:
    env = {**os.environ, "TOKENWARD_ADMIN_TOKEN": TOKEN}
    done = subprocess.run([sys.executable, "-m", "tokenward", "routes", "--config", str(config_path)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = [re.split(r"\s{2,}", line.strip(), maxsplit=3) for line in done.stdout.splitlines()[1:]]
    return [(method, path, owner) for method, path, owner, _ in rows]


def _fill(path: str, key_id: str) -> str:
    return path.replace("{tenant}", "acme").replace("{id}", key_id if path.startswith("/admin/") else "job_x")


async def test_the_printed_table_is_what_the_gateway_answers(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENWARD_ADMIN_TOKEN", TOKEN)
    async with mock_backend() as mock:
        config_path = tmp_path / "gateway.yaml"
        config_path.write_text(_config_text(tmp_path, mock.url))
        listed = _listed(config_path)
        pairs = [(method, path) for method, path, _ in listed]
        assert len(pairs) == len(set(pairs)), "a method and path listed twice"
        owners = {path: owner for _, path, owner in listed}
        assert owners["/v1/chat/completions"] == "pipeline" and owners["/admin/keys"] == "admin"
        assert {"/healthz", "/readyz", "/openapi.json", "/metrics", "/v1/jobs", "/admin/reload",
                "/v1/messages/count_tokens", "/admin/tenants/{tenant}/cache/purge"} <= set(owners)

        gateway = Gateway(parse_config(config_path.read_text(), environ={"TOKENWARD_ADMIN_TOKEN": TOKEN}))
        server, port = await start_app(gateway)
        try:
            key, record = await gateway.parts.keys.create("acme")
            auth = {"authorization": f"Bearer {key}"}
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
                # revoking the key last: the pipeline's requests use it
                for method, path, owner in sorted(listed, key=lambda row: row[1].endswith("/revoke")):
                    headers = ADMIN if owner == "admin" else auth
                    body = BODIES.get(path)
                    if owner == "admin" and method == "POST":
                        body = {"reason": "routes test", "tenant": "acme", "action": "suspend", "for": "1m",
                                "capability": "chat", "max_output_tokens": 10}
                    reply = await client.request(method, _fill(path, record.id), json=body, headers=headers)
                    reason = reply.headers.get("x-tokenward-reason")
                    assert reason not in NOT_SERVED, (method, path, reply.status_code, reply.text)
                    if owner == "pipeline":
                        assert reply.status_code < 300, (method, path, reply.text)

                # what the table does not list is not answered
                listed_pairs = set(pairs)
                for method, path in [("POST", "/healthz"), ("DELETE", "/readyz"), ("POST", "/openapi.json"),
                                     ("GET", "/v1/chat/completions"), ("DELETE", "/v1/models"),
                                     ("GET", "/v1/nothing"), ("PUT", "/v1/jobs"), ("GET", "/admin/nothing"),
                                     ("DELETE", "/admin/keys"), ("GET", "/_mock/stats")]:
                    assert (method, path) not in listed_pairs
                    headers = ADMIN if path.startswith("/admin/") else auth
                    reply = await client.request(method, path, headers=headers)
                    assert reply.headers.get("x-tokenward-reason") in NOT_SERVED, (method, path, reply.text)
        finally:
            await stop_app(server)
