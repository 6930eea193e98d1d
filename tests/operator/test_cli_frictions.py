"""The small frictions of a new operator's first hours: ``TOKENWARD_CONFIG`` read by every
command that takes ``--config`` (serve, check-config, keys, budget, tenants); ``--version``;
``tenants controls`` says when there are none; a successful reload logged at INFO, not
WARNING; the lab's tables whole when its output goes to a file, and its install hint the one
that works from a clone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from typer.testing import CliRunner

from tests.support import ROOT, base_config
from tokenward import __version__
from tokenward.cli import lab as lab_cli
from tokenward.cli.main import app
from tokenward.config import extras

ENV_CLEAN = {"TOKENWARD_STORE_URL": None, "TOKENWARD_KEYSTORE_URL": None, "TOKENWARD_UPSTREAM_LOCAL_URL": None}


def _config(tmp_path) -> str:
    path = tmp_path / "tw.yaml"
    path.write_text(base_config("http://127.0.0.1:1/v1"))
    return str(path)


def _invoke(*args: str, config: str | None):
    return CliRunner().invoke(app, list(args), env={**ENV_CLEAN, "TOKENWARD_CONFIG": config})


def test_every_config_command_reads_tokenward_config(tmp_path):
    config = _config(tmp_path)
    checked = _invoke("check-config", config=config)
    assert checked.exit_code == 0 and checked.stdout.startswith(f"{config}: ok"), checked.output
    created = _invoke("keys", "create", "--tenant", "acme", config=config)
    assert created.exit_code == 0 and created.stdout.startswith("tw_"), created.output
    listed = _invoke("keys", "list", "--json", config=config)
    assert listed.exit_code == 0 and '"tenant":"acme"' in listed.stdout, listed.output
    audit = _invoke("keys", "audit", config=config)
    assert audit.exit_code == 0 and "create" in audit.stdout
    controls = _invoke("tenants", "controls", config=config)
    assert controls.exit_code == 0, controls.output
    budget = _invoke("budget", "show", "--tenant", "acme", config=config)
    # the memory store: it went on to ask the gateway (so it read the config), and says why it cannot
    assert budget.exit_code == 1 and "admin.token_env" in budget.stderr, budget.output
    missing = _invoke("keys", "list", config=None)
    assert missing.exit_code == 2 and "TOKENWARD_CONFIG" in missing.output
    nothing = _invoke("check-config", config=None)
    assert nothing.exit_code == 2 and "TOKENWARD_CONFIG" in nothing.stderr


def test_the_argument_or_option_wins_over_the_variable(tmp_path):
    config = _config(tmp_path)
    other = tmp_path / "bad.yaml"
    other.write_text("plans: {team: {max_output_tokens: -1}}\n")
    assert _invoke("check-config", config, config=str(other)).exit_code == 0
    refused = _invoke("check-config", "--config", str(other), config=config)
    assert refused.exit_code == 2 and "bad.yaml" in refused.stderr


def test_serve_reads_tokenward_config_and_logs_a_reload_at_info(tmp_path):
    config = _config(tmp_path)
    env = {**os.environ, "TOKENWARD_CONFIG": config}
    for name in ENV_CLEAN:
        env.pop(name, None)
    proc = subprocess.Popen([sys.executable, "-m", "tokenward", "serve", "--port", "0"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 30
        assert proc.stdout is not None
        while not any("listening on" in line for line in lines):
            assert time.monotonic() < deadline and proc.poll() is None, lines
            lines.append(proc.stdout.readline())
        proc.send_signal(signal.SIGHUP)
        while not any("config reloaded" in line for line in lines):
            assert time.monotonic() < deadline and proc.poll() is None, lines
            lines.append(proc.stdout.readline())
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    reloaded = next(line for line in lines if "config reloaded" in line)
    assert " INFO tokenward" in reloaded and "WARNING" not in reloaded, reloaded


def test_version():
    done = CliRunner().invoke(app, ["--version"])
    assert done.exit_code == 0 and done.stdout == f"tokenward {__version__}\n"


def test_tenants_controls_says_when_there_are_none(tmp_path):
    config = _config(tmp_path)
    none = _invoke("tenants", "controls", config=config)
    assert none.exit_code == 0 and none.stdout == "no controls in force (no abuse actions, pauses or exemptions)\n"
    acme = _invoke("tenants", "controls", "acme", "--history", config=config)
    assert acme.stdout == "no controls for tenant acme recorded (no abuse actions, pauses or exemptions)\n"
    as_json = _invoke("tenants", "controls", "--json", config=config)
    assert as_json.exit_code == 0 and as_json.stdout == ""     # JSON lines: none is no line


def test_lab_tables_are_not_wrapped_off_a_terminal(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    done = subprocess.run([sys.executable, "-m", "tokenward", "lab", "two-tenants", "--out", str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    header = next(line for line in done.stdout.splitlines() if line.lstrip().startswith(("┃", "|")))
    rows = [line for line in done.stdout.splitlines() if line.lstrip().startswith("│")]
    assert len(header) > 80 and rows
    assert all(len(row) == len(header) for row in rows)            # one line per row: nothing folded


def test_the_lab_install_hint_fits_how_tokenward_was_installed(monkeypatch):
    assert extras.source_tree() == ROOT                              # the tests run from a clone
    assert "pip install -e '.[lab]'" in lab_cli.install_message()
    monkeypatch.setattr(extras, "source_tree", lambda: None)         # installed from the index
    assert lab_cli.install_message().endswith("pip install 'tokenward[lab]'")
