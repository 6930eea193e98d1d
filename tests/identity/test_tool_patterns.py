"""``allow_tools`` entries are glob patterns (config/globs.py): ``"*"`` admits any
client-run tool, ``"mcp__*"`` a family, a literal name only itself. Each refusal names the
tool, and the backend never sees the refused request; the control beside it gets through."""

from __future__ import annotations

import copy

import pytest

from tests.identity.conftest import BASE_CONFIG, assert_refused, bearer, chat, run_gateway, write_config


def _tool(name: str) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


# the tools Claude Code 2.1.197 sends by default (tests/fixtures/agents/), and MCP ones
AGENT_TOOLS = [_tool(n) for n in ("Agent", "Bash", "Edit", "Read", "Write", "WebFetch", "TaskCreate")]


@pytest.fixture
async def tool_gw(tmp_path, backend):
    plans = copy.deepcopy(BASE_CONFIG["plans"])
    plans["team"]["allow_tools"] = ["search", "mcp__*", "Task*"]
    plans["research"]["allow_tools"] = ["*"]
    plans["research"]["max_tools"] = 64
    async with run_gateway(write_config(tmp_path, backend.port, plans=plans)) as gw:
        yield gw


async def test_a_star_admits_any_client_run_tool(tool_gw, backend):
    umbrella = await tool_gw.new_key("umbrella")
    before = await backend.requests()
    tools = AGENT_TOOLS + [_tool("mcp__github__create_issue")]
    resp = await tool_gw.post("/v1/chat/completions", chat(tools=tools, max_tokens=4), bearer(umbrella))
    assert resp.status_code == 200, resp.text
    assert len((await backend.last_body())["tools"]) == len(tools)
    assert await backend.requests() == before + 1


async def test_a_family_pattern_admits_its_family_only(tool_gw, backend):
    acme = await tool_gw.new_key("acme")
    before = await backend.requests()
    ok = [_tool("search"), _tool("mcp__github__create_issue"), _tool("mcp__slack__post"), _tool("TaskGet")]
    assert (await tool_gw.post("/v1/chat/completions", chat(tools=ok, max_tokens=4), bearer(acme))).status_code == 200
    for i, name in ((1, "mcp_github"), (1, "Bash"), (1, "task_get")):   # one underscore; not listed; case counts
        resp = await tool_gw.post("/v1/chat/completions", chat(tools=[_tool("search"), _tool(name)], max_tokens=4),
                                  bearer(acme))
        await assert_refused(resp, 403, "tools_not_entitled", backend, before + 1, param=f"tools[{i}].function.name")
        assert name in resp.json()["error"]["message"]
    forced = {"type": "function", "function": {"name": "Bash"}}
    resp = await tool_gw.post("/v1/chat/completions", chat(tools=ok, tool_choice=forced, max_tokens=4), bearer(acme))
    await assert_refused(resp, 403, "tools_not_entitled", backend, before + 1, param="tool_choice.function.name")


async def test_no_pattern_admits_no_tool(tool_gw, backend):
    initech = await tool_gw.new_key("initech")   # plan locked: no allow_tools
    before = await backend.requests()
    resp = await tool_gw.post("/v1/chat/completions", chat(tools=[_tool("search")], max_tokens=4), bearer(initech))
    await assert_refused(resp, 403, "tools_not_entitled", backend, before, param="tools[0].function.name")
    assert (await tool_gw.post("/v1/chat/completions", chat(max_tokens=4), bearer(initech))).status_code == 200
