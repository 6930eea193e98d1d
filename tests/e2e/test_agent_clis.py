"""Claude Code and the Codex CLI, unchanged, through a gateway in front of the bundled mock.

Each CLI (scripts/agent-clis.sh installs the pinned versions) runs as a user runs it, in a
temporary HOME (and CODEX_HOME), with its defaults on (Claude Code's betas, Codex's
multi-agent tools), changed only in base URL, key and (Codex) a provider block with
``wire_api = "responses"`` and ``web_search = "disabled"`` (tests/fixtures/agent_clis.py).
The gateway has the plan docs/agents.md gives agents (tests/fixtures/agent_clis.py
``agent_config``): the CLIs' default model names arrive as aliases of ``agent-large``.

Per CLI: a text turn (``claude -p "say hi" --output-format json``, ``codex exec
--skip-git-repo-check "say hi"``) and a tool round trip steered through the mock: its first
answer calls one of the CLI's own harmless tools (Claude Code's ``Read`` of a file in the
temp dir, Codex's ``clock.sleep``), the CLI runs it and sends the result, the second answer
is text. The steering headers go through each CLI's own way of adding headers
(``ANTHROPIC_CUSTOM_HEADERS``; the provider block's ``http_headers``). Each runs against an
upstream that serves only chat (the request translated) and one that serves the agents'
APIs itself (forwarded natively).

What a client saw is what was charged: Claude Code's reported usage equals the usage the
gateway settled on, and no request of the run was refused. Skipped, with the reason, only when node or the CLIs are not installed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures import agent_clis as clis
from tests.support import MockBackend, RunningGateway, gateway_in_process, mock_backend

pytestmark = pytest.mark.skipif(clis.missing_reason() is not None, reason=clis.missing_reason() or "")

UPSTREAMS = {"translated": ("chat",), "native": ("chat", "messages", "responses")}
# Codex's tool, named as the backend sees it: natively NAMESPACE.TOOL (the mock answers a
# function_call with ``namespace``); translated to chat, NAMESPACE__TOOL (the dialect's
# flattening: chat function names allow no dot), named back for Codex in the answer
CODEX_TOOL = {"native": "clock.sleep", "translated": "clock__sleep"}


@pytest.fixture(params=sorted(UPSTREAMS))
async def stack(request, tmp_path):
    async with mock_backend() as backend:
        config = clis.agent_config(backend.url, tmp_path, UPSTREAMS[request.param])
        async with gateway_in_process(config, tmp_path / "decisions.jsonl") as gw:
            box = clis.Sandbox.make(tmp_path)
            yield request.param, backend, gw, box


def _expect_success(run: clis.Run, gw: RunningGateway) -> None:
    """The run succeeded, with no refusal on the way."""
    output = run.stdout + run.stderr
    refused = [r for r in gw.decisions() if r.get("reason") and r.get("route") != "other"]
    if run.returncode != 0 or '"is_error":true' in run.stdout.replace(" ", "") or refused:
        shown = [(r.get("status"), r.get("reason"), r.get("route")) for r in refused]
        raise AssertionError(f"exit {run.returncode}; refusals {shown}\n{output[-3000:]}")


def _turns(gw: RunningGateway) -> list[dict[str, Any]]:
    return [r for r in gw.decisions() if r.get("route") in ("/v1/messages", "/v1/responses")]


async def _claude(gw: RunningGateway, box: clis.Sandbox, prompt: str, headers: dict[str, str] | None = None
                  ) -> clis.Run:
    return await clis.run(clis.claude_argv(prompt), clis.claude_env(box, gw.url, gw.key, headers), box.work)


async def _codex(gw: RunningGateway, box: clis.Sandbox, prompt: str, headers: dict[str, str] | None = None
                 ) -> clis.Run:
    return await clis.run(clis.codex_argv(prompt), clis.codex_env(box, gw.url + "/v1", gw.key, headers), box.work)


async def test_claude_code_text_turn(stack):
    _, backend, gw, box = stack
    run = await _claude(gw, box, "say hi")
    _expect_success(run, gw)
    result = json.loads(run.stdout)
    assert result["is_error"] is False and result["result"].startswith("tok")
    turns = _turns(gw)
    assert len(turns) == 1 and turns[0]["model"] == "agent-large" and await backend.requests() == 1
    # what the client saw is what was charged
    assert result["usage"]["output_tokens"] == turns[0]["usage"]["completion_tokens"]


async def test_claude_code_tool_round_trip(stack):
    _, backend, gw, box = stack
    steer = {"x-mock-tool-call": "Read", "x-mock-tool-once": "1",
             "x-mock-tool-args": json.dumps({"file_path": str(box.note)})}
    run = await _claude(gw, box, "read note.txt", steer)
    _expect_success(run, gw)
    result = json.loads(run.stdout)
    assert result["is_error"] is False and result["num_turns"] == 2
    assert len(_turns(gw)) == 2 and await backend.requests() == 2
    sent = json.dumps(await backend.last_body())
    assert "the tokenward note: 42" in sent     # the file's text went back as the tool's result
    settled = sum(t["usage"]["completion_tokens"] for t in _turns(gw))
    assert result["usage"]["output_tokens"] == settled


async def test_codex_text_turn(stack):
    _, backend, gw, box = stack
    run = await _codex(gw, box, "say hi")
    _expect_success(run, gw)
    assert "tok tok" in run.stdout
    turns = _turns(gw)
    assert len(turns) == 1 and turns[0]["model"] == "agent-large" and await backend.requests() == 1


async def test_codex_tool_round_trip(stack):
    mode, backend, gw, box = stack
    steer = {"x-mock-tool-call": CODEX_TOOL[mode], "x-mock-tool-once": "1",
             "x-mock-tool-args": json.dumps({"duration_ms": 1})}
    run = await _codex(gw, box, "sleep a millisecond", steer)
    _expect_success(run, gw)
    assert "tok tok" in run.stdout
    assert len(_turns(gw)) == 2 and await backend.requests() == 2
    assert "Sleep completed" in json.dumps(await backend.last_body())   # clock.sleep's own output went back


def test_the_pins_are_what_the_fixtures_were_captured_with():
    readme = (Path(__file__).resolve().parents[1] / "fixtures" / "agents" / "README.md").read_text()
    assert f"`@anthropic-ai/claude-code` {clis.CLAUDE_VERSION}" in readme
    assert f"`@openai/codex` {clis.CODEX_VERSION}" in readme
