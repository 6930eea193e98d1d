"""``tokenward keys ...`` as an operator runs it, against the config's key store.

One test runs the real command in a subprocess (exactly one line on stdout); the rest
invoke the same typer app in-process, which is the same code without the interpreter
start-up per command.
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx

from tests.identity.conftest import bearer, chat, write_config
from typer.testing import CliRunner

from tests.identity.processes import ServeProcess, cli
from tokenward.cli.main import app
from tokenward.keys import open_keystore


class Result:
    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    result = CliRunner().invoke(app, list(args), env=env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Result(result.exit_code, result.stdout, result.stderr)


def test_cli_lifecycle(tmp_path):
    config = str(write_config(tmp_path, 1))
    created = cli("keys", "create", "--config", config, "--tenant", "acme", "--name", "ci",
                  "--models", "small-chat,large-chat", "--expires-in", "30d")
    assert created.returncode == 0, created.stderr
    # The key, once, as the only line on stdout.
    lines = created.stdout.splitlines()
    assert len(lines) == 1 and created.stdout == lines[0] + "\n"
    key = lines[0]
    assert key.startswith("tw_") and key[3:19] in created.stderr and key not in created.stderr
    key_id = key[3:19]

    listed = run("keys", "list", "--config", config, "--json")
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["id"], r["tenant"], r["name"], r["state"], r["models"]) for r in rows] == \
        [(key_id, "acme", "ci", "active", ["small-chat", "large-chat"])]
    assert key[20:] not in listed.stdout
    table = run("keys", "list", "--config", config)
    assert key_id in table.stdout and "active" in table.stdout

    done = run("keys", "suspend", key_id, "--for", "1h", "--config", config, "--reason", "anomaly",
               "--reviewer", "alice")
    assert done.returncode == 0, done.stderr
    assert json.loads(run("keys", "list", "--config", config, "--json").stdout)["state"] == "suspended"
    done = run("keys", "reinstate", key_id, "--config", config, "--reason", "false alarm")
    assert done.returncode == 0, done.stderr
    # The whole key as ID: a leaked key found in a log.
    done = run("keys", "revoke", key, "--config", config, "--reason", "leaked", "--reviewer", "bob")
    assert done.returncode == 0, done.stderr
    again = run("keys", "revoke", key_id, "--config", config, "--reason", "again")
    assert again.returncode == 1 and "already revoked" in again.stderr

    audit = run("keys", "audit", key_id, "--config", config, "--json")
    trail = [json.loads(line) for line in audit.stdout.splitlines()]
    assert [(a["action"], a["reason"]) for a in trail] == [
        ("create", None), ("suspend", "anomaly"), ("reinstate", "false alarm"), ("revoke", "leaked")]
    assert trail[1]["duration_s"] == 3600 and trail[1]["reviewer"] == "alice" and trail[3]["reviewer"] == "bob"
    assert all(a["scope"] == f"key:{key_id}" and a["at"] > 0 for a in trail)
    assert trail[2]["reviewer"].startswith("cli")


def test_cli_refuses_what_could_never_work(tmp_path):
    config = str(write_config(tmp_path, 1))
    for args, message in ((["--tenant", "nobody"], "unknown tenant"),
                          (["--tenant", "globex", "--models", "large-chat"], "not in tenant globex's plan"),
                          (["--tenant", "acme", "--expires-in", "forever"], "invalid duration")):
        done = run("keys", "create", "--config", config, *args)
        assert done.returncode != 0 and message in done.stderr and done.stdout == ""
    assert run("keys", "revoke", "nonsense", "--config", config, "--reason", "x").returncode == 2
    missing = run("keys", "revoke", "0123456789abcdef", "--config", config, "--reason", "x")
    assert missing.returncode == 1 and "no key" in missing.stderr
    assert run("keys", "revoke", "0123456789abcdef", "--config", config).returncode == 2  # --reason required


def test_keystore_url_env_override_reaches_postgres(tmp_path, postgres_server):
    url = postgres_server.new_database()
    config = str(write_config(tmp_path, 1))
    created = run("keys", "create", "--config", config, "--tenant", "acme", env={"TOKENWARD_KEYSTORE_URL": url})
    assert created.returncode == 0, created.stderr

    async def lookup():
        store = await open_keystore(url)
        try:
            return await store.get(created.stdout.strip()[3:19])
        finally:
            await store.close()

    assert asyncio.run(lookup()).tenant == "acme"
    assert not (tmp_path / "keys.db").exists()


def test_demo_mode_prints_a_working_key(tmp_path):
    config = write_config(tmp_path, 1, upstreams={"local": {"base_url": "builtin:mock"}},
                          demo={"tenant": "acme"}, logging={"decisions": "off"})
    server = ServeProcess(config)
    try:
        server.ready()
        line = server.readline(time.monotonic() + 10)  # printed at start-up, before ready
        assert line.startswith("demo key: tw_")
        key = line.split()[-1]
        resp = httpx.post(f"{server.url}/v1/chat/completions", json=chat(), headers=bearer(key), timeout=10)
        assert resp.status_code == 200, resp.text
        assert httpx.post(f"{server.url}/v1/chat/completions", json=chat(), timeout=10).status_code == 401
    finally:
        stderr = server.stop()
    assert key[20:] not in stderr


def test_repeated_models_option_keeps_every_model(tmp_path):
    """``--models a --models b`` used to keep only the last one, silently."""
    config = str(write_config(tmp_path, 1))
    created = run("keys", "create", "--config", config, "--tenant", "acme",
                  "--models", "small-chat", "--models", "large-chat")
    assert created.returncode == 0, created.stderr
    listed = [json.loads(line) for line in run("keys", "list", "--config", config, "--json").stdout.splitlines()]
    assert listed[-1]["models"] == ["small-chat", "large-chat"]
    mixed = run("keys", "create", "--config", config, "--tenant", "acme", "--models", "small-chat,large-chat",
                "--models", "small-chat")
    assert mixed.returncode == 0, mixed.stderr
    listed = [json.loads(line) for line in run("keys", "list", "--config", config, "--json").stdout.splitlines()]
    assert sorted(listed[-1]["models"]) == ["large-chat", "small-chat"]
