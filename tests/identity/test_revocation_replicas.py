"""Two gateway processes sharing Redis and PostgreSQL: a key revoked through one is refused
by the other within one second. The key cache TTL is set to 30 s here, so only the Redis
announcement can make that happen in time."""

from __future__ import annotations

import time

import httpx
from typer.testing import CliRunner

from tests.identity.conftest import ADMIN_TOKEN, bearer, chat, write_config
from tests.identity.processes import ServeProcess
from tokenward.cli.main import app


def _until_refused(url: str, key: str, limit_s: float) -> tuple[float, dict]:
    started = time.monotonic()
    with httpx.Client(base_url=url, timeout=5.0) as client:
        while True:
            resp = client.post("/v1/chat/completions", json=chat(), headers=bearer(key))
            elapsed = time.monotonic() - started
            if resp.status_code != 200:
                return elapsed, resp.json()["error"]
            assert elapsed < limit_s, f"still admitted after {elapsed:.2f}s"
            time.sleep(0.01)


def test_revocation_reaches_the_other_replica_within_one_second(tmp_path, backend_process, redis_server,
                                                                 postgres_server):
    keystore = postgres_server.new_database()
    config = write_config(tmp_path, backend_process, store={"url": redis_server.url},
                          keystore={"url": keystore, "cache_ttl_s": 30.0})
    first, second = ServeProcess(config), ServeProcess(config)
    try:
        first.ready()
        second.ready()
        runner = CliRunner()
        keys = [runner.invoke(app, ["keys", "create", "--config", str(config), "--tenant", "acme"]).stdout.strip()
                for _ in range(2)]
        for server in (first, second):  # warm both caches
            for key in keys:
                resp = httpx.post(f"{server.url}/v1/chat/completions", json=chat(), headers=bearer(key), timeout=10)
                assert resp.status_code == 200, resp.text

        # Through the first replica's admin API; measured on the second.
        resp = httpx.post(f"{first.url}/admin/keys/{keys[0][3:19]}/revoke", headers=bearer(ADMIN_TOKEN),
                          json={"reason": "leaked", "reviewer": "ops"}, timeout=10)
        assert resp.status_code == 200, resp.text
        elapsed, error = _until_refused(second.url, keys[0], 1.0)
        assert error["code"] == "key_revoked" and elapsed < 1.0

        # Through the CLI (a third process): both replicas hear it.
        done = runner.invoke(app, ["keys", "suspend", keys[1], "--for", "1h", "--config", str(config),
                                   "--reason", "anomaly"])
        assert done.exit_code == 0, done.stderr
        for server in (first, second):
            elapsed, error = _until_refused(server.url, keys[1], 1.0)
            assert error["code"] == "key_suspended"
    finally:
        errors = first.stop() + second.stop()
    assert all(k[20:] not in errors for k in keys)
