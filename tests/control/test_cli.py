"""The CLI's operator controls against a gateway's config (no Redis: the change lands in the
key store's database, where a running gateway polls it): precise errors with exit 2 and
nothing recorded, or the change and its audit record."""

from __future__ import annotations

import asyncio
import json

from typer.testing import CliRunner

from tokenward.cli.main import app

from .conftest import bearer, chat, gateway, tools_chat, write_config


def _run(*args: str):
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_bad_requests_exit_2_and_record_nothing(tmp_path):
    config = str(write_config(tmp_path, 1))
    cases = [
        (["tenants", "pause", "acme", "video", "--for", "1h", "--reason", "r"], "capability must be"),
        (["tenants", "pause", "nobody", "tools", "--for", "1h", "--reason", "r"], "no tenant 'nobody'"),
        (["tenants", "pause", "acme", "tools", "--for", "soon", "--reason", "r"], "--for: invalid duration"),
        (["tenants", "resume", "acme", "tools", "--reason", "r"], "tools is not paused"),
        (["abuse", "reinstate", "--tenant", "acme", "--reason", "r"], "no abuse action is in force"),
        (["abuse", "act", "ban", "--tenant", "acme", "--reason", "r"], "action must be one of"),
        (["abuse", "exempt", "--reason", "r", "--for", "1d"], "name a key"),
        (["abuse", "reinstate", "--tenant", "acme", "--reason", "r", "--appeal", "maybe"], "appeal must be"),
    ]
    for args, message in cases:
        code, _, err = _run(*args, "--config", config)
        assert code == 2 and message in err, (args, code, err)
    code, out, _ = _run("tenants", "controls", "--history", "--json", "--config", config)
    assert code == 0 and out == ""


async def test_a_cli_pause_reaches_a_gateway_without_redis(tmp_path, backend):
    config = write_config(tmp_path, backend.port, control={"poll_s": 0.1})
    async with gateway(config) as gw:
        key = bearer(await gw.new_key())
        code, out, err = await asyncio.to_thread(_run, "tenants", "pause", "acme", "tools", "--for", "10m",
                                                 "--reason", "incident", "--reviewer", "dana", "--config", str(config))
        assert code == 0, err
        assert "paused tools for tenant acme" in out and "within control.poll_s" in out
        for _ in range(50):
            resp = await gw.client.post("/v1/chat/completions", json=tools_chat(), headers=key)
            if resp.status_code == 403:
                break
            await asyncio.sleep(0.05)
        assert resp.json()["error"]["code"] == "capability_paused"
        assert (await gw.client.post("/v1/chat/completions", json=chat(), headers=key)).status_code == 200
        code, out, _ = await asyncio.to_thread(_run, "tenants", "controls", "acme", "--json", "--config", str(config))
        rows = [json.loads(line) for line in out.splitlines()]
        assert [(r["kind"], r["capability"], r["by"], r["reason"]) for r in rows] == [
            ("pause", "tools", "dana", "incident")]
