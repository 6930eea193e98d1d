"""What an operator sees from ``tokenward serve``, as real processes: a start that fails is
one line on stderr and nothing on stdout; "listening" means started; a busy port names the
port; the quickstart shows the same demo key on every start; a relative SQLite path in the
config is relative to the config's folder.

Every test runs the quickstart from a copy in a temp dir, so its key store lands there.
"""

from __future__ import annotations

import os
import re
import select
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.fixtures.processes import stop_process
from tests.fixtures.redis_server import redis_server, redis_server_session  # noqa: F401
from tests.support import ROOT

QUICKSTART = ROOT / "examples" / "quickstart.yaml"
KEYS_DB = "tokenward-quickstart-keys.db"
DEMO_FILE = ".tokenward-demo-key"
CHAT = {"model": "small-chat", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}


def quickstart_copy(folder: Path, edit=lambda text: text) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "quickstart.yaml"
    path.write_text(edit(QUICKSTART.read_text()))
    return path


def tokenward(*args: str, cwd: Path, env: dict[str, str] | None = None,
              timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tokenward", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, env=_env(env))


def _env(extra: dict[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TOKENWARD_KEYSTORE_URL", "TOKENWARD_STORE_URL")}
    return {**env, **(extra or {})}


class Serving:
    """``tokenward serve --port 0``, read line by line from stdout until it says where it listens."""

    def __init__(self, config: Path, cwd: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tokenward", "serve", "--config", str(config), "--port", "0", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=_env(env))
        self.lines: list[str] = []
        self._buffer = b""

    def readline(self, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no line from serve in time; so far {self.lines}")
            if select.select([fd], [], [], min(left, 0.1))[0]:
                chunk = os.read(fd, 4096)
                if not chunk:
                    raise AssertionError(f"serve closed stdout (exit {self.proc.wait(5)}): "
                                         f"{self.proc.stderr.read().decode()!r}")
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        self.lines.append(line.decode())
        return self.lines[-1]

    def started(self) -> tuple[str, str]:
        """(url, demo key): the first line says where, the next one the key."""
        match = re.fullmatch(r"tokenward listening on (http://127\.0\.0\.1:\d+)", self.readline())
        assert match, self.lines
        key = re.fullmatch(r"demo key: (tw_\S+)", self.readline())
        assert key, self.lines
        return match.group(1), key.group(1)

    def stop(self) -> None:
        stop_process(self.proc)


def run_until_started(config: Path, cwd: Path) -> tuple[str, str]:
    server = Serving(config, cwd)
    try:
        url, key = server.started()
        reply = httpx.post(url + "/v1/chat/completions", json=CHAT, headers={"authorization": f"Bearer {key}"},
                           timeout=10)
        assert reply.status_code == 200, reply.text
        return url, key
    finally:
        server.stop()


# 3: a failed start prints one line and nothing misleading before it

@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_failed_start_is_one_line_on_stderr_and_nothing_on_stdout(tmp_path, workers, redis_server):
    (tmp_path / "blocker").write_text("a file where the decision log wants a folder\n")
    config = quickstart_copy(tmp_path, lambda t: t.replace("decisions: stdout", "decisions: blocker/d.jsonl")
                             .replace("url: memory", f"url: {redis_server.url}"))   # several workers share it
    assert tokenward("check-config", "--config", str(config), cwd=tmp_path).returncode == 0  # fails only at start-up
    done = tokenward("serve", "--config", str(config), "--port", "0", "--workers", workers, cwd=tmp_path)
    assert done.returncode == 3
    assert done.stdout == ""   # no "listening", no demo key
    assert re.fullmatch(r"tokenward: \S.*blocker'?\n", done.stderr), done.stderr


def test_a_key_store_that_refuses_is_one_line_too(tmp_path):
    with socket.socket() as probe:   # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    config = quickstart_copy(tmp_path, lambda t: t.replace(
        "sqlite:///tokenward-quickstart-keys.db", f"postgresql://tw@127.0.0.1:{closed}/keys"))
    done = tokenward("serve", "--config", str(config), "--port", "0", cwd=tmp_path)
    assert done.returncode == 3 and done.stdout == ""
    assert done.stderr.startswith("tokenward: ") and done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr


def test_listening_is_said_only_once_the_gateway_started(tmp_path):
    server = Serving(quickstart_copy(tmp_path), tmp_path)
    try:
        url, _ = server.started()
        # No waiting: by the time it says so, start-up is over and the mock backend is up.
        assert httpx.get(url + "/readyz", timeout=5).status_code == 200
    finally:
        server.stop()


# 4: a busy port is one line naming the port

def test_a_busy_port_is_one_line_naming_it(tmp_path):
    config = quickstart_copy(tmp_path)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = tokenward("serve", "--config", str(config), "--port", str(port), cwd=tmp_path)
    assert done.returncode == 3
    assert done.stdout == ""
    assert done.stderr == (f"tokenward: cannot listen on 127.0.0.1:{port}: address already in use "
                           "(choose another port with --port, or server.port in the config)\n")
    assert not (tmp_path / DEMO_FILE).exists()   # nothing was made for a gateway that never ran


# 5: the quickstart reuses its demo key

def test_the_quickstart_shows_the_same_demo_key_until_it_is_revoked(tmp_path):
    config = quickstart_copy(tmp_path)
    _, first = run_until_started(config, tmp_path)
    saved = tmp_path / DEMO_FILE
    assert saved.read_text().strip() == first
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    _, again = run_until_started(config, tmp_path)
    assert again == first
    listed = tokenward("keys", "list", "--config", str(config), cwd=tmp_path)
    assert listed.returncode == 0 and listed.stdout.count(first[3:19]) == 1   # one key, not one per start
    revoked = tokenward("keys", "revoke", first, "--config", str(config), "--reason", "demo over", cwd=tmp_path)
    assert revoked.returncode == 0, revoked.stderr
    _, fresh = run_until_started(config, tmp_path)
    assert fresh != first and saved.read_text().strip() == fresh


def test_several_workers_share_the_kept_demo_key(tmp_path, redis_server):
    config = quickstart_copy(tmp_path, lambda t: t.replace("url: memory", f"url: {redis_server.url}"))
    _, first = run_until_started(config, tmp_path)
    server = Serving(config, tmp_path, "--workers", "2")
    try:
        _, key = server.started()
    finally:
        server.stop()
    assert key == first


# 6: relative SQLite paths resolve against the config file's folder

def test_the_key_store_lands_beside_the_config_whatever_the_working_directory(tmp_path):
    config = quickstart_copy(tmp_path / "etc")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _, key = run_until_started(config, elsewhere)
    assert (tmp_path / "etc" / KEYS_DB).exists() and (tmp_path / "etc" / DEMO_FILE).exists()
    assert list(elsewhere.iterdir()) == []
    # The CLI finds the same store from anywhere too.
    listed = tokenward("keys", "list", "--config", "etc/quickstart.yaml", cwd=tmp_path)
    assert listed.returncode == 0 and key[3:19] in listed.stdout


def test_a_relative_path_from_the_environment_is_relative_to_the_working_directory(tmp_path):
    config = quickstart_copy(tmp_path / "etc")
    here = tmp_path / "here"
    here.mkdir()
    server = Serving(config, here, env={"TOKENWARD_KEYSTORE_URL": "sqlite:///env-keys.db"})
    try:
        server.started()
    finally:
        server.stop()
    assert (here / "env-keys.db").exists() and (here / DEMO_FILE).exists()
    assert not (tmp_path / "etc" / KEYS_DB).exists()
