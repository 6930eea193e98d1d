"""``tokenward budget show`` reads a tenant's budgets back from Redis in the units an
operator thinks in, after real reservations through the Admitter."""

from __future__ import annotations

import json
import os
import math
import subprocess
import sys
import time

from typer.testing import CliRunner

from tests.budget.test_admission import CONFIG, admit, config
from tokenward.budget.admission import Admitter
from tokenward.budget.redis import RedisStore
from tokenward.cli.main import app


def cli(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(app, list(args), env=env)


def run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """The command as an operator runs it: its own process (it runs its own event loop)."""
    return subprocess.run([sys.executable, "-m", "tokenward", *args], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=60)


async def test_show_reads_what_reservations_hold(tmp_path, redis_server):
    path = tmp_path / "gateway.yaml"
    path.write_text(CONFIG)
    admitter = Admitter(config(), RedisStore(redis_server.url, timeout_s=1.0))
    started = time.monotonic()
    held = [await admit(admitter, "acme", tokens=1000, cost=2500) for _ in range(2)]
    assert all(d.admitted for d in held)
    env = {"TOKENWARD_STORE_URL": redis_server.url}

    done = run("budget", "show", "--config", str(path), "--tenant", "acme", "--json", env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    rows = {row["limit"]: row for row in report["limits"]}
    assert report["open_reservations"] == 2 and report["namespace"] == "tw:{t:acme}"
    refilled = math.ceil(6000 / 60 * (time.monotonic() - started))     # the bucket refills as we look
    assert 4000 <= rows["tokens"]["available"] <= 4000 + refilled and rows["tokens"]["capacity"] == 6000
    assert rows["streams"]["held"] == 2 and rows["streams"]["limit_value"] == 3
    assert 598 <= rows["requests"]["available"] <= 600                  # 10 a second come back
    assert rows["spend_daily"]["spent"] == 5000 and rows["spend_daily"]["cap"] == 10_000

    table = run("budget", "show", "--config", str(path), "--tenant", "acme", env=env)
    assert table.returncode == 0, table.stderr
    assert "2 of 3 slots held" in table.stdout and "open reservations: 2" in table.stdout

    for decision in held:
        await admitter.settle(decision.ticket, 0, 0, "z")
    report = json.loads(run("budget", "show", "--config", str(path), "--tenant", "acme", "--json", env=env).stdout)
    rows = {row["limit"]: row for row in report["limits"]}
    assert report["open_reservations"] == 0 and rows["streams"]["held"] == 0 and rows["spend_daily"]["spent"] == 0
    await admitter.close()


def test_show_refuses_what_it_cannot_read(tmp_path):
    path = tmp_path / "gateway.yaml"
    path.write_text(CONFIG)
    unknown = cli("budget", "show", "--config", str(path), "--tenant", "nobody")
    assert unknown.exit_code == 2 and "no tenant 'nobody'" in unknown.output
    memory = cli("budget", "show", "--config", str(path), "--tenant", "acme")
    assert memory.exit_code == 1 and "store.url is memory" in memory.output
    dead = cli("budget", "show", "--config", str(path), "--tenant", "acme",
               env={"TOKENWARD_STORE_URL": f"unix://{tmp_path}/nothing.sock"})
    assert dead.exit_code == 1 and "budget store" in dead.output
