"""End to end: the quickstart gateway as a real process, the official openai SDK as client."""

from __future__ import annotations

import re
import subprocess
import sys

import openai
import pytest

from tests.fixtures.redis_server import redis_server, redis_server_session  # noqa: F401
from tests.support import ROOT, spawn_gateway

QUICKSTART = ROOT / "examples" / "quickstart.yaml"


def copied(folder) -> "Path":
    """The quickstart config copied into ``folder``: its key store and demo key land there
    (a relative SQLite path is relative to the config's folder), never in examples/."""
    from pathlib import Path

    path = Path(folder) / "quickstart.yaml"
    path.write_text(QUICKSTART.read_text())
    return path


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("quickstart")
    proc = spawn_gateway(copied(cwd), cwd=cwd, wait_for="demo key:")
    key = next(m.group(1) for line in proc.lines if (m := re.search(r"demo key: (\S+)", line)))
    yield proc.url, key
    proc.stop()


def test_sdk_non_streaming_chat(quickstart):
    url, key = quickstart
    client = openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)
    reply = client.chat.completions.create(model="small-chat", max_tokens=5,
                                           messages=[{"role": "user", "content": "Say hello"}])
    assert reply.choices[0].message.content
    assert reply.usage.completion_tokens == 5


def test_sdk_streaming_chat(quickstart):
    url, key = quickstart
    client = openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)
    stream = client.chat.completions.create(model="small-chat", max_tokens=7, stream=True,
                                            messages=[{"role": "user", "content": "Count"}])
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text.count("tok") == 7


def test_sdk_code_without_max_tokens_works_on_the_quickstart(quickstart):
    """Most SDK code leaves max_tokens out: the quickstart's plan fills its default
    (default_max_tokens) and the answer says what it set."""
    url, key = quickstart
    client = openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model="small-chat", messages=[{"role": "user", "content": "Say hello"}])
    assert raw.headers["x-tokenward-max-tokens"] == "256"
    assert raw.parse().choices[0].message.content
    clamped = client.chat.completions.with_raw_response.create(
        model="small-chat", max_tokens=1_000_000, messages=[{"role": "user", "content": "hi"}])
    assert clamped.headers["x-tokenward-max-tokens"] == "1024"


def test_sdk_sees_refusals_as_its_usual_exceptions(quickstart):
    url, key = quickstart
    client = openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="no-such-model", max_tokens=5,
                                       messages=[{"role": "user", "content": "hi"}])
    assert info.value.code in ("unknown_model", "model_not_entitled")


def test_check_config_exit_codes(tmp_path):
    ok = subprocess.run([sys.executable, "-m", "tokenward", "check-config", str(QUICKSTART)],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("plans:\n  team:\n    max_output_tokens: lots\n")
    out = subprocess.run([sys.executable, "-m", "tokenward", "check-config", str(bad)],
                         capture_output=True, text=True)
    assert out.returncode == 2
    assert "plans.team.max_output_tokens: expected int, got str" in out.stderr


def test_several_workers_share_one_demo_key(tmp_path, redis_server):
    config = copied(tmp_path)   # several workers need a shared budget store
    config.write_text(config.read_text().replace("url: memory", f"url: {redis_server.url}"))
    proc = spawn_gateway(config, cwd=tmp_path, wait_for="demo key:", args=("--workers", "2"))
    try:
        key = next(m.group(1) for line in proc.lines if (m := re.search(r"demo key: (\S+)", line)))
        client = openai.OpenAI(base_url=proc.url + "/v1", api_key=key, max_retries=0)
        # New connections each time, so both workers (one listening socket) answer some.
        for _ in range(12):
            reply = client.with_options(timeout=10).chat.completions.create(
                model="small-chat", max_tokens=2, messages=[{"role": "user", "content": "hi"}])
            assert reply.usage.completion_tokens == 2
            client.close()
            client = openai.OpenAI(base_url=proc.url + "/v1", api_key=key, max_retries=0)
    finally:
        proc.stop()
    rest = proc.proc.stdout.read() if proc.proc.stdout else ""
    printed = [line for line in proc.lines + rest.splitlines() if "demo key:" in line]
    assert len(printed) == 1, printed
