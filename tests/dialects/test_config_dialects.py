"""``upstreams.NAME.dialects`` and the routes, as check-config and the loader see them."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tokenward.cli.main import app
from tokenward.config import parse_config
from tokenward.config.schema import DEFAULT_ROUTES
from tokenward.errors import ConfigError

BASE = """
upstreams:
  v: {{base_url: "http://127.0.0.1:9/v1"{extra}}}
models:
  m: {{upstream: v}}
plans:
  p: {{models: [m]}}
tenants:
  t: {{plan: p}}
"""
ROUTES = ("/v1/responses", "/v1/messages", "/v1/messages/count_tokens")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_chat_is_the_default_and_any_of_the_three_may_be_declared():
    assert parse_config(BASE.format(extra=""), environ={}).upstreams["v"].dialects == ("chat",)
    config = parse_config(BASE.format(extra=", dialects: [chat, responses, messages]"), environ={})
    assert config.upstreams["v"].dialects == ("chat", "responses", "messages")


def test_an_unknown_dialect_is_a_config_error_naming_the_field():
    with pytest.raises(ConfigError) as caught:
        parse_config(BASE.format(extra=", dialects: [chat, responsez]"), environ={})
    assert caught.value.path == "upstreams.v.dialects[1]" and "'responses'" in caught.value.message


def test_the_routes_are_served_by_default_and_listed_in_both_examples(tmp_path):
    assert set(ROUTES) <= {route.path for route in DEFAULT_ROUTES}
    assert set(ROUTES) <= {route.path for route in parse_config(BASE.format(extra=""), environ={}).routes}
    for example in (EXAMPLES / "gateway.yaml", EXAMPLES / "quickstart.yaml"):
        text = example.read_text()
        assert all(f"path: {path}" in text for path in ROUTES), example
        result = CliRunner().invoke(app, ["check-config", str(example)])
        assert result.exit_code == 0, result.output
