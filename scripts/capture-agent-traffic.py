#!/usr/bin/env python3
"""Captures what Claude Code and the Codex CLI send, into tests/fixtures/agents/.

Each scenario (tests/fixtures/agent_traffic.py SCENARIOS) runs one CLI, unchanged but for
its base URL, key and (Codex) provider block, in a fresh temporary HOME, against a
recording backend on loopback (tests/fixtures/recording_backend.py: the bundled mock
behind a layer that records every request), with no gateway in between. A tool scenario's
backend answers the first turn with a call of one of the CLI's own harmless tools and the
next with text. The CLIs come from scripts/agent-clis.sh.

    PYTHONPATH=src python3 scripts/capture-agent-traffic.py            # every scenario
    PYTHONPATH=src python3 scripts/capture-agent-traffic.py codex-tool # one
    PYTHONPATH=src python3 scripts/capture-agent-traffic.py --inventory  # print what they send
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fixtures import agent_clis as clis  # noqa: E402
from tests.fixtures.agent_traffic import (  # noqa: E402
    FIXTURES, SCENARIOS, STABLE_ROOT, UNSTABLE_HEADERS, Scenario, inventory, load)
from tests.fixtures.recording_backend import Recorded, recording_backend  # noqa: E402

KEY = "sk-tokenward-capture"


def _stable(text: str, root: str) -> str:
    return text.replace(root, STABLE_ROOT)


def _request(request: Recorded, root: str) -> dict[str, Any]:
    headers = {k: _stable(v, root) for k, v in request.headers if k not in UNSTABLE_HEADERS}
    body = json.loads(_stable(request.body.decode(), root)) if request.body else None
    return {"method": request.method, "path": request.path, "query": request.query, "headers": headers,
            "body": body}


async def capture(scenario: Scenario) -> dict[str, Any]:
    steer: dict[str, str] = {}
    async with recording_backend(steer) as (backend, url):
        box = clis.Sandbox.make()
        try:
            if scenario.tool:
                assert scenario.tool_args is not None
                steer.update({"x-mock-tool-call": scenario.tool, "x-mock-tool-once": "1",
                              "x-mock-tool-args": scenario.tool_args.replace("{NOTE}", str(box.note))})
                backend.steer = steer
            if scenario.cli == "claude":
                argv, env = clis.claude_argv(scenario.prompt), clis.claude_env(box, url, KEY)
            else:
                argv, env = clis.codex_argv(scenario.prompt), clis.codex_env(box, url + "/v1", KEY)
            run = await clis.run(argv, env, box.work, timeout=120)
            root = str(box.root)
            return {
                "scenario": scenario.name,
                "cli": {"claude": f"@anthropic-ai/claude-code@{clis.CLAUDE_VERSION}",
                        "codex": f"@openai/codex@{clis.CODEX_VERSION}"}[scenario.cli],
                "argv": [Path(argv[0]).name, *argv[1:]],
                "steering": {k: _stable(v, root) for k, v in steer.items()},
                "exit_code": run.returncode,
                "stdout_tail": _stable(run.stdout[-2000:], root),
                "requests": [_request(r, root) for r in backend.requests],
            }
        finally:
            box.cleanup()


def print_inventory() -> None:
    for cli, prefix in (("Claude Code", "claude-code"), ("Codex", "codex")):
        captures = [load(s.name) for s in SCENARIOS if s.name.startswith(prefix)]
        print(f"## {cli}")
        for key, values in inventory(captures).items():
            print(f"- {key}: {', '.join(f'`{v}`' for v in values)}")
        print()


async def main(names: list[str]) -> int:
    reason = clis.missing_reason()
    if reason:
        print(f"cannot capture: {reason}", file=sys.stderr)
        return 2
    chosen = [s for s in SCENARIOS if not names or s.name in names]
    failed = 0
    for scenario in chosen:
        result = await capture(scenario)
        FIXTURES.mkdir(exist_ok=True)
        (FIXTURES / f"{scenario.name}.json").write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
        turns = len([r for r in result["requests"] if r["method"] == "POST"])
        print(f"{scenario.name}: exit {result['exit_code']}, {len(result['requests'])} requests ({turns} POST)")
        failed += result["exit_code"] != 0
    return 1 if failed else 0


if __name__ == "__main__":
    args = sys.argv[1:]
    if args == ["--inventory"]:
        print_inventory()
        sys.exit(0)
    sys.exit(asyncio.run(main(args)))
