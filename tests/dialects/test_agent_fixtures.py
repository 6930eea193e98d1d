"""The coding agents' real requests, replayed: each request Claude Code 2.1.197 and Codex
0.171.0 sent (tests/fixtures/agents/, captured by scripts/capture-agent-traffic.py) is
posted as it was, headers included, to an in-process gateway with the plan an agent needs
(docs/agents.md): every client-run tool (``allow_tools: ["*"]``), the agents' default
model names as aliases, a context window that holds their prompts. Each must be admitted
and reach the backend, so a parser change that would refuse an agent fails here, fast and
without node.

The cases the dialect parsers refuse today are marked ``xfail(strict=True)`` naming the
field, so the parser work of issue 37 flips them (a strict xfail that passes fails).
"""

from __future__ import annotations

import json

import httpx
import pytest

from tests.fixtures.agent_clis import agent_config
from tests.fixtures.agent_traffic import SCENARIOS, load, model_requests
from tests.support import gateway_in_process, mock_backend

# headers the replay sets itself: the credentials (the gateway's key, not the capture's)
_OWN = frozenset({"authorization", "x-api-key", "connection", "accept-encoding"})


def _cases() -> list:
    cases = []
    for scenario in SCENARIOS:
        for turn, request in enumerate(model_requests(load(scenario.name))):
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if (reason := REFUSED_TODAY.get(
                request["path"])) else []
            cases.append(pytest.param(scenario.name, turn, marks=marks, id=f"{scenario.name}-turn{turn + 1}"))
    return cases


# What today's dialect parsers refuse, first and then behind it (each removed in turn), per API
REFUSED_TODAY: dict[str, str] = {}


@pytest.mark.parametrize("scenario,turn", _cases())
async def test_each_captured_request_is_admitted(tmp_path, scenario, turn):
    request = model_requests(load(scenario))[turn]
    async with mock_backend() as backend:
        async with gateway_in_process(agent_config(backend.url, tmp_path), tmp_path / "decisions.jsonl") as gw:
            headers = {k: v for k, v in request["headers"].items() if k not in _OWN}
            headers["authorization" if request["path"] == "/v1/responses" else "x-api-key"] = (
                f"Bearer {gw.key}" if request["path"] == "/v1/responses" else gw.key)
            url = gw.url + request["path"] + (f"?{request['query']}" if request["query"] else "")
            async with httpx.AsyncClient(timeout=30) as client:
                reply = await client.post(url, content=json.dumps(request["body"]).encode(), headers=headers)
            assert reply.status_code == 200, (reply.status_code, reply.headers.get("x-tokenward-reason"),
                                              reply.text[:400])
            assert await backend.requests() == 1
            record = gw.decisions()[-1]
            assert record["model"] == "agent-large" and record["notes"]["model_alias"] in ("claude-*", "gpt-*")


def test_the_fixtures_are_what_the_readme_says():
    """Every scenario has its capture, each run ended well, and the tool runs made a round trip."""
    for scenario in SCENARIOS:
        capture = load(scenario.name)
        assert capture["exit_code"] == 0, scenario.name
        turns = model_requests(capture)
        assert len(turns) == (2 if scenario.tool else 1), scenario.name
        if scenario.tool:
            last = turns[-1]["body"]
            carried = json.dumps(last.get("messages") or last.get("input"))
            assert "tool_result" in carried or "function_call_output" in carried
