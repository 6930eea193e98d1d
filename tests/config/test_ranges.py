"""Numbers in the config are range-checked (schema.RANGES); 0 keeps its meaning where it has one.

The refusals themselves, one file per case with its exact message, are in cases/range_*.yaml.
"""

from __future__ import annotations

import types
import typing

import msgspec
import pytest
from typer.testing import CliRunner

from tokenward.cli.main import app
from tokenward.config import parse_config, schema
from tokenward.config.loader import effective_plan
from tokenward.errors import ConfigError

STRUCTS = [obj for obj in vars(schema).values()
           if isinstance(obj, type) and issubclass(obj, msgspec.Struct) and obj.__module__ == schema.__name__]


def _numeric(tp) -> bool:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return any(_numeric(arg) for arg in typing.get_args(tp))
    return tp in (int, float)


def test_every_numeric_field_has_a_decided_range():
    missing = []
    for struct in STRUCTS:
        hints = typing.get_type_hints(struct)
        for field in msgspec.structs.fields(struct):
            if _numeric(hints[field.name]) and field.name not in schema.RANGES.get(struct, {}):
                missing.append(f"{struct.__name__}.{field.name}")
    assert not missing, f"decide a range in schema.RANGES for: {missing}"


def test_the_ranges_name_only_real_numeric_fields():
    for struct, ranges in schema.RANGES.items():
        hints = typing.get_type_hints(struct)
        for name in ranges:
            assert name in hints and _numeric(hints[name]), f"{struct.__name__}.{name}"


def test_every_default_is_inside_its_own_range():
    for struct, ranges in schema.RANGES.items():
        for field in msgspec.structs.fields(struct):
            bound = ranges.get(field.name)
            if bound is not None and isinstance(field.default, (int, float)):
                assert bound.holds(field.default), f"{struct.__name__}.{field.name}"


ZERO_MEANS_SOMETHING = """
server: {port: 0}                                  # a port the OS picks
upstreams: {u: {base_url: "http://127.0.0.1:1/v1", health_ttl_s: 0, pool_timeout_s: 0, idle_timeout_s: 0}}
models: {m: {upstream: u, input_price_per_million: 0}}
routes: [{path: /v1/chat/completions, max_body_bytes: 0}]   # 0: the edge's cap
plans:
  team:
    models: [m]
    max_concurrent_streams: 0                      # budget/limits.py: no limit
    tokens_per_minute: 0
    requests_per_minute: 0
    max_tools: 0                                   # no tools at all
    daily_spend_usd: 0
    cache_ttl_seconds: 0                           # the cache section's TTL
keystore: {cache_ttl_s: 0}
"""


def test_zero_is_accepted_where_it_means_something():
    cfg = parse_config(ZERO_MEANS_SOMETHING, environ={})
    team = cfg.plans["team"]
    assert cfg.server.port == 0 and cfg.routes[0].max_body_bytes == 0
    assert (team.max_concurrent_streams, team.tokens_per_minute, team.requests_per_minute) == (0, 0, 0)


def test_the_edges_of_a_range_are_inside_it():
    cfg = parse_config("server: {port: 65535, workers: 1}\nstore: {fail_open_fraction: 1}\n"
                       "screening: {policies: {p: {injection: {block_at: 1, restrict_at: 0}}}}\n", environ={})
    assert cfg.server.port == 65535 and cfg.store.fail_open_fraction == 1.0


def test_a_null_is_not_range_checked():
    cfg = parse_config("plans: {team: {daily_spend_usd: null, max_inflight_tokens: null}}\n", environ={})
    assert cfg.plans["team"].daily_spend_usd is None


def test_tenant_overrides_follow_the_plan_rules():
    text = "plans: {team: {}}\ntenants: {acme: {plan: team, overrides: {max_concurrent_streams: 0, max_n: 3}}}\n"
    plan = effective_plan(parse_config(text, environ={}), "acme")
    assert plan.max_concurrent_streams == 0 and plan.max_n == 3
    with pytest.raises(ConfigError) as info:
        parse_config(text.replace("max_n: 3", "max_n: 0"), environ={})
    assert str(info.value) == "tenants.acme.overrides.max_n: must be >= 1"


@pytest.mark.parametrize("args, message", [
    (("--port", "70000"), "--port: must be between 0 and 65535"),
    (("--port", "-1"), "--port: must be between 0 and 65535"),
    (("--workers", "0"), "--workers: must be >= 1"),
])
def test_serve_holds_its_command_line_overrides_to_the_same_ranges(tmp_path, args, message):
    config = tmp_path / "gateway.yaml"
    config.write_text("plans: {team: {}}\n")
    result = CliRunner().invoke(app, ["serve", "--config", str(config), *args])
    assert result.exit_code == 2
    assert result.stderr.strip() == message
