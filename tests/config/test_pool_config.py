"""An upstream's pool in the config: base_url as a pool of one, targets, and the environment's
overrides, TOKENWARD_UPSTREAM_<NAME>_URL (a pool of one) and _URLS (a whole pool)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from tokenward.cli.main import app
from tokenward.config import parse_config
from tokenward.config.pools import pool_targets, target_label
from tokenward.errors import ConfigError

ONE = "upstreams:\n  local-gpu: {base_url: 'http://10.0.0.1:8000/v1'}\n"
POOL = """upstreams:
  local-gpu:
    targets:
      - {url: "http://10.0.0.1:8000/v1", weight: 2, max_inflight_requests: 8}
      - {url: "https://engine.internal/v1", max_inflight_tokens: 100000}
    routing: prefix_affinity
"""


def test_base_url_is_a_pool_of_one_with_the_defaults():
    up = parse_config(ONE, environ={}).upstreams["local-gpu"]
    (target,) = pool_targets(up)
    assert (target.url, target.weight, target.max_inflight_requests, target.max_inflight_tokens) == (
        "http://10.0.0.1:8000/v1", 1, None, None)
    assert (up.routing, up.max_attempts, up.queue_timeout_ms, up.eject_after, up.eject_base_s, up.eject_max_s,
            up.health_interval_s, up.retry_on_timeout) == ("least_reserved", 2, 0, 3, 5.0, 60.0, 2.0, False)


def test_targets_are_labelled_by_host_and_port():
    up = parse_config(POOL, environ={}).upstreams["local-gpu"]
    assert [target_label(t.url) for t in pool_targets(up)] == ["10.0.0.1:8000", "engine.internal:443"]
    assert [t.weight for t in up.targets] == [2, 1] and up.routing == "prefix_affinity"


def test_url_overrides_a_pool_of_one_either_way_it_is_written():
    env = {"TOKENWARD_UPSTREAM_LOCAL_GPU_URL": "http://10.9.9.9:9000/v1"}
    assert parse_config(ONE, environ=env).upstreams["local-gpu"].base_url == "http://10.9.9.9:9000/v1"
    one_target = "upstreams:\n  local-gpu: {targets: [{url: 'http://10.0.0.1:8000/v1', weight: 3}]}\n"
    (target,) = parse_config(one_target, environ=env).upstreams["local-gpu"].targets
    assert (target.url, target.weight) == ("http://10.9.9.9:9000/v1", 3)


def test_url_on_a_pool_of_several_is_an_error_naming_urls():
    env = {"TOKENWARD_UPSTREAM_LOCAL_GPU_URL": "http://10.9.9.9:9000/v1"}
    with pytest.raises(ConfigError) as info:
        parse_config(POOL, environ=env)
    assert str(info.value) == ("upstreams.local-gpu.targets: TOKENWARD_UPSTREAM_LOCAL_GPU_URL sets a pool of one; "
                               "this pool has 2 targets: set TOKENWARD_UPSTREAM_LOCAL_GPU_URLS instead")


def test_urls_replace_the_pool_keeping_each_targets_settings_when_the_count_matches():
    env = {"TOKENWARD_UPSTREAM_LOCAL_GPU_URLS": "http://10.1.0.1:8000/v1, http://10.1.0.2:8000/v1"}
    targets = parse_config(POOL, environ=env).upstreams["local-gpu"].targets
    assert [(t.url, t.weight, t.max_inflight_requests) for t in targets] == [
        ("http://10.1.0.1:8000/v1", 2, 8), ("http://10.1.0.2:8000/v1", 1, None)]
    env = {"TOKENWARD_UPSTREAM_LOCAL_GPU_URLS": "http://10.1.0.1:8000/v1,http://10.1.0.2:8000/v1,http://10.1.0.3/v1"}
    up = parse_config(ONE, environ=env).upstreams["local-gpu"]
    assert up.base_url is None and [t.weight for t in up.targets] == [1, 1, 1]


def test_a_bad_url_from_the_environment_is_named_as_the_variables(tmp_path):
    path = tmp_path / "gw.yaml"
    path.write_text(POOL + "models: {m: {upstream: local-gpu}}\n")
    result = CliRunner().invoke(app, ["check-config", "--config", str(path)],
                                env={"TOKENWARD_UPSTREAM_LOCAL_GPU_URLS": "http://a:1/v1,nope"})
    assert result.exit_code != 0
    assert "TOKENWARD_UPSTREAM_LOCAL_GPU_URLS" in result.output and "got 'nope'" in result.output
