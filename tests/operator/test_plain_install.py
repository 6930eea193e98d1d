"""What the README's install gives, alone: a fresh venv with nothing but ``pip install -e .``
(built once per test session, from pip's cache). It stays under 200 MB without numpy,
scipy, huggingface-hub or httpx; ``check-config --connect`` reaches the stores and the
backend with what the gateway itself uses (exit 0, and 3 naming the backend once it is
gone); an ``hf:`` tokenizer is a config error naming the extra that brings it; and the
quickstart serves a chat request."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support import ROOT, chat, mock_backend

MAX_MB = 200
HEAVY = ("numpy", "scipy", "huggingface_hub", "httpx", "datasketch", "tokenizers", "websockets", "watchfiles")


def _env() -> dict[str, str]:
    """This machine's environment, less what would point the venv at another copy of the code."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")
           and not k.startswith("TOKENWARD_")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture(scope="session")
def plain_venv(tmp_path_factory) -> Path:
    venv = tmp_path_factory.mktemp("plain") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=_env(), timeout=120)
    done = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "-e", str(ROOT)], capture_output=True,
                          text=True, env=_env(), timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return venv


def _tokenward(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(venv / "bin" / "tokenward"), *args], capture_output=True, text=True, cwd=cwd,
                          env=_env(), timeout=120)


def test_the_plain_install_is_light(plain_venv):
    size = subprocess.run(["du", "-sm", str(plain_venv)], capture_output=True, text=True, check=True)
    megabytes = int(size.stdout.split()[0])
    assert megabytes <= MAX_MB, f"{megabytes} MB"
    site = next((plain_venv / "lib").glob("python*/site-packages"))
    assert [name for name in HEAVY if (site / name).exists()] == []
    code = "import tokenward.abuse.sketch, tokenward.app, tokenward.cli.main, tokenward.cli.connect"
    assert subprocess.run([str(plain_venv / "bin" / "python"), "-c", code], env=_env(), timeout=60).returncode == 0
    print(f"plain install: {megabytes} MB")


async def test_check_config_connect_after_the_plain_install(plain_venv, tmp_path):
    config = tmp_path / "gateway.yaml"
    async with mock_backend() as mock:
        text = (ROOT / "examples" / "gateway.yaml").read_text().replace("http://127.0.0.1:9100/v1", mock.url)
        config.write_text(text)
        probed = await asyncio.to_thread(_tokenward, plain_venv, "check-config", "--connect", str(config),
                                         cwd=tmp_path)
        assert probed.returncode == 0, probed.stderr
        assert f"upstream local at {mock.url}: ok" in probed.stdout
        assert f"key store at sqlite:///{tmp_path}/tokenward-keys.db: ok" in probed.stdout
        assert "Traceback" not in probed.stderr
    gone = await asyncio.to_thread(_tokenward, plain_venv, "check-config", "--connect", str(config), cwd=tmp_path)
    assert gone.returncode == 3, gone.stderr
    assert f"tokenward: cannot reach the upstream local at {mock.url}: connection refused\n" in gone.stderr
    assert "Traceback" not in gone.stderr


def test_an_hf_tokenizer_without_the_extra_names_the_extra(plain_venv, tmp_path):
    tokenizer = tmp_path / "tokenizer.json"
    tokenizer.write_text("{}")
    text = (ROOT / "examples" / "gateway.yaml").read_text()
    config = tmp_path / "gateway.yaml"
    config.write_text(text.replace("tokenizer: tiktoken:o200k_base", f"tokenizer: hf:{tokenizer}", 1))
    checked = _tokenward(plain_venv, "check-config", str(config), cwd=tmp_path)
    assert checked.returncode == 2
    assert checked.stderr.startswith(f"{config}: models.small-chat.tokenizer: 'hf:{tokenizer}' needs the tokenizers "
                                     "package, in the hf extra: pip install -e '.[hf]'"), checked.stderr


def test_the_quickstart_serves_after_the_plain_install(plain_venv, tmp_path):
    config = tmp_path / "quickstart.yaml"
    config.write_text((ROOT / "examples" / "quickstart.yaml").read_text())
    proc = subprocess.Popen([str(plain_venv / "bin" / "tokenward"), "serve", "--config", str(config), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path, env=_env())
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        while not (any("listening on" in line for line in lines) and any("demo key:" in line for line in lines)):
            assert time.monotonic() < deadline and proc.poll() is None, lines
            lines.append(proc.stdout.readline())
        url = next(m.group(1) for line in lines if (m := re.search(r"listening on (http://\S+)", line)))
        key = next(m.group(1) for line in lines if (m := re.search(r"demo key: (\S+)", line)))
        reply = httpx.post(url + "/v1/chat/completions", json=chat(), headers={"authorization": f"Bearer {key}"},
                           timeout=30)
        assert reply.status_code == 200, reply.text
        assert reply.json()["usage"]["completion_tokens"] > 0
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert shutil.which("tokenward", path=str(plain_venv / "bin"))
