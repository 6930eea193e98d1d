"""``check-config`` and ``serve`` refuse exactly the same configs (cli/check.py).

Each file in verify_cases/ has a config that loads (its shape, ranges and references are
fine) but that start-up would refuse; its first line is the exact message. ``check-config``
and ``serve`` both print it as ``FILE: message`` and exit 2, and ``serve`` never gets as far
as binding a port.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import tokenward.cli.serve
from tokenward.cli.main import app
from tokenward.config import load_config, parse_config
from tokenward.cli.check import verify_config
from tokenward.errors import ConfigError

CASES = sorted((Path(__file__).parent / "verify_cases").glob("*.yaml"))
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
UNSET = ("TOKENWARD_TEST_UNSET_CACHE_KEY", "TOKENWARD_TEST_UNSET_API_KEY", "TOKENWARD_STORE_URL",
         "TOKENWARD_KEYSTORE_URL")


def expected(case: Path) -> str:
    return case.read_text().splitlines()[0].removeprefix("# error: ")


@pytest.fixture
def clean_env(monkeypatch):
    for name in UNSET:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_verify_refuses_what_start_up_would(case, clean_env):
    cfg = load_config(case, environ={})   # the shape is fine
    with pytest.raises(ConfigError) as info:
        verify_config(cfg)
    assert str(info.value) == expected(case)


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_check_config_and_serve_print_the_same_refusal(case, clean_env, monkeypatch):
    def started(*_args, **_kwargs):
        raise AssertionError("serve got past the checks check-config makes")

    monkeypatch.setattr(tokenward.cli.serve, "serve", started)
    runner = CliRunner()
    checked = runner.invoke(app, ["check-config", "--config", str(case)])
    served = runner.invoke(app, ["serve", "--config", str(case), "--port", "0"])
    assert (checked.exit_code, served.exit_code) == (2, 2), served.output
    assert checked.stderr == served.stderr == f"{case}: {expected(case)}\n"
    assert checked.stdout == served.stdout == ""


@pytest.mark.parametrize("name", ["quickstart.yaml", "gateway.yaml"])
def test_the_shipped_examples_pass_every_check(name, clean_env):
    verify_config(load_config(EXAMPLES / name, environ={}))


def test_a_malformed_redis_url_is_refused_by_both(clean_env):
    base = "upstreams: {u: {base_url: 'http://127.0.0.1:1/v1'}}\nmodels: {m: {upstream: u}}\n"
    with pytest.raises(ConfigError) as info:
        verify_config(parse_config(base + "store: {url: 'redis://127.0.0.1:sixthousand/0'}\n", environ={}))
    assert str(info.value).startswith("store.url: not a usable Redis URL: ")


def test_builtin_mock_and_environment_urls_are_checked_as_serve_sees_them(clean_env):
    base = "upstreams: {u: {base_url: 'builtin:mock'}}\nmodels: {m: {upstream: u}}\n"
    verify_config(parse_config(base, environ={}))
    with pytest.raises(ConfigError) as info:
        verify_config(parse_config(base, environ={"TOKENWARD_UPSTREAM_U_URL": "gpu-box:8000"}))
    assert str(info.value) == ("upstreams.u.base_url: expected http(s)://host[:port][/path] or builtin:mock, "
                               "got 'gpu-box:8000'")


@pytest.mark.parametrize("args", [
    ("check-config", "{f}"),
    ("check-config", "--config", "{f}"),
    ("check-config", "-c", "{f}"),
    ("check-config", "{f}", "--config", "{f}"),
])
def test_check_config_takes_the_file_either_way(tmp_path, args, clean_env):
    config = tmp_path / "gateway.yaml"
    config.write_text((EXAMPLES / "gateway.yaml").read_text())
    result = CliRunner().invoke(app, [a.format(f=config) for a in args])
    assert result.exit_code == 0, result.output
    assert result.stdout == f"{config}: ok (2 models, 2 plans, 2 tenants)\n"


def test_check_config_wants_one_file(tmp_path):
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text("{}\n")
    second.write_text("{}\n")
    runner = CliRunner()
    none = runner.invoke(app, ["check-config"])
    two = runner.invoke(app, ["check-config", str(first), "--config", str(second)])
    assert none.exit_code == two.exit_code == 2
    assert "check-config --config FILE" in none.stderr and "once" in two.stderr
