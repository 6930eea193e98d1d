"""Every config error case has a file here, with its exact message in its first line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenward.config import load_config, parse_config
from tokenward.config.loader import effective_plan
from tokenward.errors import ConfigError

CASES = sorted((Path(__file__).parent / "cases").glob("*.yaml"))
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_each_broken_config_names_its_path(case):
    expected = case.read_text().splitlines()[0].removeprefix("# error: ")
    with pytest.raises(ConfigError) as info:
        load_config(case, environ={})
    assert str(info.value) == expected


@pytest.mark.parametrize("name", ["quickstart.yaml", "gateway.yaml"])
def test_shipped_examples_load(name):
    cfg = load_config(EXAMPLES / name, environ={})
    assert cfg.models and cfg.plans and cfg.tenants


def test_gateway_example_states_every_plan_field_of_the_contract():
    text = (EXAMPLES / "gateway.yaml").read_text()
    team = load_config(EXAMPLES / "gateway.yaml", environ={}).plans["team"]
    assert (team.models, team.max_context_tokens, team.max_output_tokens, team.tokens_per_minute,
            team.max_concurrent_streams, team.allow_system_prompt, team.allow_tools, team.allow_files) == (
        ("small-chat", "large-chat"), 128000, 8192, 400000, 20, True, ("search", "calculator"),
        ("application/pdf", "text/plain"))
    assert (team.max_n, team.allow_best_of, team.max_outer_items, team.max_messages, team.max_content_parts,
            team.max_stop, team.max_tools, team.max_request_work, team.requests_per_minute,
            team.daily_spend_usd, team.monthly_spend_usd) == (4, False, 16, 256, 64, 4, 32, 2000000, 600, 50, 1000)
    for field in ("max_n:", "allow_best_of:", "max_outer_items:", "max_messages:", "max_content_parts:",
                  "max_stop:", "max_tools:", "max_request_work:", "requests_per_minute:",
                  "daily_spend_usd:", "monthly_spend_usd:"):
        assert text.count(field) >= 2, field  # stated explicitly on both plans


def test_environment_overrides():
    base = "upstreams:\n  local-gpu: {base_url: 'http://127.0.0.1:1/v1'}\n"
    cfg = parse_config(base, environ={"TOKENWARD_STORE_URL": "redis://127.0.0.1:6379/0",
                                      "TOKENWARD_KEYSTORE_URL": "postgresql://u@h/db",
                                      "TOKENWARD_UPSTREAM_LOCAL_GPU_URL": "http://10.0.0.1:8000/v1"})
    assert cfg.store.url == "redis://127.0.0.1:6379/0"
    assert cfg.keystore.url == "postgresql://u@h/db"
    assert cfg.upstreams["local-gpu"].base_url == "http://10.0.0.1:8000/v1"


def test_tenant_overrides_apply_on_top_of_the_plan():
    cfg = parse_config("plans: {team: {max_n: 2, max_stop: 3}}\n"
                       "tenants: {acme: {plan: team, overrides: {max_n: 8}}}\n", environ={})
    plan = effective_plan(cfg, "acme")
    assert plan.max_n == 8 and plan.max_stop == 3


def test_decisions_off_may_be_written_bare():
    assert parse_config("logging: {decisions: off}\n", environ={}).logging.decisions is False
