"""``tokenward budget show`` with the README's config (examples/gateway.yaml: store.url
memory): the budgets live inside the gateway, so the command asks the running gateway's
admin API (``GET /admin/budget/{tenant}``) with the token ``admin.token_env`` names, and
prints what it prints for Redis. Spend reads the same as on the status page. Without the
token it says which variable to set."""

from __future__ import annotations

import asyncio
import json

from typer.testing import CliRunner

from tests.support import ROOT, chat, gateway_in_process, mock_backend
from tokenward.budget.policy import usd_text
from tokenward.cli.main import app
from tokenward.config.key_limits import KeyLimits

TOKEN = "budget-show-admin-token"


def _readme_config(tmp_path, mock_url: str, port: int = 8080) -> str:
    text = (ROOT / "examples" / "gateway.yaml").read_text()
    text = text.replace("http://127.0.0.1:9100/v1", mock_url).replace("  port: 8080", f"  port: {port}")
    text = text.replace("sqlite:///tokenward-keys.db", f"sqlite:///{tmp_path}/keys.db")
    return text.replace("  decisions: stdout", "  decisions: off")


def _show(path, *args, token: str | None = TOKEN):
    env = {"TOKENWARD_ADMIN_TOKEN": token, "TOKENWARD_STORE_URL": None, "TOKENWARD_KEYSTORE_URL": None}
    return CliRunner().invoke(app, ["budget", "show", "--config", str(path), "--tenant", "acme", *args], env=env)


async def test_budget_show_reads_the_running_gateways_memory_store(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENWARD_ADMIN_TOKEN", TOKEN)
    async with mock_backend() as mock, gateway_in_process(_readme_config(tmp_path, mock.url)) as gw:
        port = int(gw.url.rsplit(":", 1)[1])
        path = tmp_path / "gateway.yaml"
        path.write_text(_readme_config(tmp_path, mock.url, port))   # the config names where it listens
        own = await gw.gateway.parts.keys.create("acme", limits=KeyLimits(daily_spend_usd=0.5,
                                                                              tokens_per_minute=9000))
        async with gw.client() as client:
            for key in (gw.key, own[0]):
                reply = await client.post(gw.url + "/v1/chat/completions", json=chat(),
                                          headers={"authorization": f"Bearer {key}"})
                assert reply.status_code == 200, reply.text

            done = await asyncio.to_thread(_show, path, "--json")
            assert done.exit_code == 0, done.output
            report = json.loads(done.stdout)
            rows = {row["limit"]: row for row in report["limits"]}
            assert report["tenant"] == "acme" and report["open_reservations"] == 0
            assert 0 < rows["spend_daily"]["spent"] < rows["spend_daily"]["cap"]
            assert rows["tokens"]["capacity"] == 400_000 and rows["tokens"]["available"] > 0

            with_key = await asyncio.to_thread(_show, path, "--key", own[1].id, "--json")
            assert with_key.exit_code == 0, with_key.output
            key_rows = {row["limit"]: row for row in json.loads(with_key.stdout)["limits"]}
            assert key_rows["key_spend_daily"]["cap"] == 500_000 and key_rows["key_spend_daily"]["spent"] > 0
            assert key_rows["key_tokens"]["per_minute"] == 9000

            table = await asyncio.to_thread(_show, path)
            assert table.exit_code == 0, table.output
            spent = usd_text(rows["spend_daily"]["spent"])
            assert f"{spent} of {usd_text(rows['spend_daily']['cap'])} spent" in table.stdout
            status = await client.get(gw.url + "/admin/status", headers={"authorization": f"Bearer {TOKEN}"})
            assert f"{spent} of {usd_text(rows['spend_daily']['cap'])}" in status.text   # one format on both

            unset = await asyncio.to_thread(_show, path, token=None)
            assert unset.exit_code == 1 and "TOKENWARD_ADMIN_TOKEN" in unset.stderr
            wrong = await asyncio.to_thread(_show, path, token="not-the-token")
            assert wrong.exit_code == 1 and "invalid admin token" in wrong.stderr
            for secret in (gw.key, own[0], TOKEN):
                assert secret not in done.stdout + table.stdout + unset.stderr + wrong.stderr


def test_budget_show_says_when_no_gateway_answers(tmp_path):
    path = tmp_path / "gateway.yaml"
    path.write_text(_readme_config(tmp_path, "http://127.0.0.1:1/v1", port=1))
    done = _show(path)
    assert done.exit_code == 1 and "no gateway answered at http://127.0.0.1:1" in done.stderr
