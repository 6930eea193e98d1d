"""What an operator is told: check-config warns of an unset admin token and of limits where
0 means "no limit"; a bad environment override is the variable's fault, not the file's;
``/metrics`` and ``/admin/*`` say how to turn them on; a ``concurrency_limit`` 429 says when
to retry."""

from __future__ import annotations

import asyncio

from typer.testing import CliRunner

from tests.support import ROOT, base_config, chat, gateway_in_process, mock_backend
from tokenward.cli.main import app

GATEWAY = ROOT / "examples" / "gateway.yaml"
ENV_CLEAN = {"TOKENWARD_STORE_URL": None, "TOKENWARD_KEYSTORE_URL": None, "TOKENWARD_UPSTREAM_LOCAL_URL": None}


def check(path, **env):
    return CliRunner().invoke(app, ["check-config", str(path)], env={**ENV_CLEAN, **env})


def test_the_example_has_an_admin_section_and_check_config_warns_while_its_token_is_unset():
    unset = check(GATEWAY, TOKENWARD_ADMIN_TOKEN=None)
    assert unset.exit_code == 0
    assert ("warning: admin.token_env: environment variable TOKENWARD_ADMIN_TOKEN is not set" in unset.stderr)
    assert unset.stdout == f"{GATEWAY}: ok (2 models, 2 plans, 2 tenants)\n"
    set_ = check(GATEWAY, TOKENWARD_ADMIN_TOKEN="t0ken")
    # the shipped screening policies use the built-in patterns, which mask no names: said once each
    assert set_.exit_code == 0 and "admin.token_env" not in set_.stderr
    assert [line.split(": warning: ")[1].split(":")[0] for line in set_.stderr.splitlines()] == [
        "screening.policies.standard.pii", "screening.policies.strict.pii"]
    assert "names are not masked" in set_.stderr


def test_check_config_warns_where_0_means_no_limit(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(base_config("http://127.0.0.1:1/v1").replace(
        "max_output_tokens: 4096}", "max_output_tokens: 4096, tokens_per_minute: 0, daily_spend_usd: 0}"))
    result = check(path)
    assert result.exit_code == 0
    assert result.stderr == (f"{path}: warning: plans.team.tokens_per_minute: 0 means no limit here (for the other "
                             "limits, daily_spend_usd: 0 for one, 0 allows none)\n")


def test_check_config_warns_of_a_default_above_the_plans_cap(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(base_config("http://127.0.0.1:1/v1").replace(
        "max_output_tokens: 4096}", "max_output_tokens: 100, default_max_tokens: 500}"))
    result = check(path)
    assert result.exit_code == 0
    assert result.stderr == (f"{path}: warning: plans.team.default_max_tokens: 500 is above max_output_tokens "
                             "(100): a request without max_tokens gets 100\n")


def test_a_bad_environment_override_is_blamed_on_the_variable():
    result = check(GATEWAY, TOKENWARD_STORE_URL="foo://x", TOKENWARD_ADMIN_TOKEN="t")
    assert result.exit_code == 2
    assert result.stderr == ("TOKENWARD_STORE_URL (environment, overrides store.url): expected 'memory', redis://, "
                             "rediss:// or unix://, got 'foo://x'\n")
    assert str(GATEWAY) not in result.stderr


async def test_metrics_and_admin_say_how_to_enable_them():
    async with mock_backend() as mock, gateway_in_process(base_config(mock.url)) as gw:
        async with gw.client() as client:
            before = await mock.requests()
            metrics = await client.get(gw.url + "/metrics")
            assert metrics.status_code == 404 and metrics.json()["error"]["code"] == "route_denied"
            assert "server.expose_metrics: true" in metrics.json()["error"]["message"]
            admin = await client.get(gw.url + "/admin/status")
            assert admin.status_code == 404 and admin.json()["error"]["code"] == "route_denied"
            assert "admin.token_env" in admin.json()["error"]["message"]
            for reply in (metrics, admin):
                assert reply.headers["x-tokenward-reason"] == "route_denied"
            assert await mock.requests() == before
            assert (await client.post(gw.url + "/v1/chat/completions", json=chat())).status_code == 200
    async with gateway_in_process(base_config(mock.url, extra="server: {expose_metrics: true}\n")) as gw:
        async with gw.client() as client:
            assert (await client.get(gw.url + "/metrics")).status_code == 200


async def test_a_concurrency_limit_429_carries_retry_after():
    plan = "max_output_tokens: 4096, max_concurrent_streams: 1}"
    async with mock_backend() as mock, gateway_in_process(
            base_config(mock.url).replace("max_output_tokens: 4096}", plan)) as gw:
        async with gw.client() as client:
            held = asyncio.ensure_future(client.post(gw.url + "/v1/chat/completions", json=chat(),
                                                     headers={"x-mock-hold": "h31"}))
            while (await mock.stats())["held"] == 0:
                await asyncio.sleep(0.01)
            before = await mock.requests()
            refused = await client.post(gw.url + "/v1/chat/completions", json=chat())
            assert refused.status_code == 429
            assert refused.json()["error"]["code"] == "concurrency_limit"
            assert refused.headers["x-tokenward-reason"] == "concurrency_limit"
            assert int(refused.headers["retry-after"]) >= 1
            assert await mock.requests() == before
            await mock.release("h31")
            assert (await held).status_code == 200
            assert (await client.post(gw.url + "/v1/chat/completions", json=chat())).status_code == 200


def test_serve_help_says_what_stops_a_start_and_what_does_not():
    text = " ".join(CliRunner().invoke(app, ["serve", "--help"], terminal_width=200).stdout.split())
    assert "the key store cannot be opened" in text
    assert "A budget store or backend that does not answer does not stop it" in text
    assert "/readyz is 503 naming it" in text


async def test_too_many_open_jobs_says_when_to_retry():
    async with mock_backend() as mock, gateway_in_process(
            base_config(mock.url).replace("max_output_tokens: 4096}", "max_output_tokens: 4096, max_open_jobs: 1}")) as gw:
        async with gw.client() as client:
            assert (await client.post(gw.url + "/v1/jobs", json={"budget_tokens": 10})).status_code == 201
            busy = await client.post(gw.url + "/v1/jobs", json={"budget_tokens": 10})
            assert busy.status_code == 429 and busy.json()["error"]["code"] == "concurrency_limit"
            assert busy.headers["x-tokenward-reason"] == "concurrency_limit"
            assert busy.headers["retry-after"] == "1"
            assert await mock.requests() == 0
