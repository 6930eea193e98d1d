"""The Vercel AI SDK's ``streamText`` with a tool, through the gateway in front of the bundled mock.

Issue 37: ``@ai-sdk/anthropic``'s ``streamText`` with tools was refused
(``tools[0].eager_input_streaming`` ``unknown_field``: the provider sets it on every function
tool by default). tests/fixtures/vercel_ai_stream.cjs streams a turn as an app writes it,
with one tool the SDK runs itself, through ``@ai-sdk/anthropic`` (``/v1/messages``) and
``@ai-sdk/openai``'s Responses model (``/v1/responses``), at the versions pinned in
scripts/vercel-ai (installed by scripts/agent-clis.sh outside the checkout). The mock is
steered (headers the SDK's provider sends) to call the tool once: the call arrives as a
streamed tool input, the SDK runs the tool and sends its result in a second step, whose
text answer completes the stream. Against an upstream serving only chat (translated) and
one serving both APIs itself (native). What the SDK added up is what the gateway charged.

Skipped, with the reason, only when node or the pinned packages are not installed.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.dialects.gateway import MODEL, dialect_gateway

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "fixtures" / "vercel_ai_stream.cjs"
PINS = ROOT / "scripts" / "vercel-ai"
PACKAGES = ("ai", "@ai-sdk/anthropic", "@ai-sdk/openai")
MODES = {"translated": ("chat",), "native": ("chat", "messages", "responses")}
ROUTES = {"anthropic": "/v1/messages", "openai": "/v1/responses"}
STEER = {"x-mock-tool-call": "get_weather", "x-mock-tool-once": "1", "x-mock-tool-args": json.dumps({"city": "Paris"})}


def install_dir() -> Path:
    override = os.environ.get("TOKENWARD_VERCEL_AI")
    if override:
        return Path(override)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "tokenward" / "npm" / "vercel-ai"


def missing_reason() -> str | None:
    """Why the SDK cannot run here, or None when it is installed at its pins."""
    if shutil.which("node") is None:
        return "node is not installed (scripts/agent-clis.sh installs Debian's nodejs)"
    for name in PACKAGES:
        if not (install_dir() / "node_modules" / name / "package.json").exists():
            return f"{name} is not installed in {install_dir()} (run scripts/agent-clis.sh)"
    lock = install_dir() / "package-lock.json"
    if not lock.exists() or lock.read_bytes() != (PINS / "package-lock.json").read_bytes():
        return f"the Vercel AI SDK in {install_dir()} is not the pinned version (run scripts/agent-clis.sh)"
    return None


pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")


async def stream_text(provider: str, base_url: str, key: str, headers: dict[str, str]) -> dict[str, Any]:
    """Runs the script to its end in a minimal environment; its one line of JSON."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp"),
           "TW_MODULES": str(install_dir()), "TW_PROVIDER": provider, "TW_BASE_URL": base_url, "TW_API_KEY": key,
           "TW_MODEL": MODEL, "TW_HEADERS": json.dumps(headers)}
    proc = await asyncio.create_subprocess_exec("node", str(SCRIPT), env=env, stdin=asyncio.subprocess.DEVNULL,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.communicate()
        raise AssertionError("streamText did not finish in 60 s") from None
    assert proc.returncode == 0, f"exit {proc.returncode}: {out.decode()[-2000:]} {err.decode()[-2000:]}"
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("provider", sorted(ROUTES))
@pytest.mark.parametrize("mode", sorted(MODES))
async def test_stream_text_with_a_tool(tmp_path, mode, provider):
    async with dialect_gateway(tmp_path, MODES[mode]) as (backend, gw):
        result = await stream_text(provider, gw.url + "/v1", gw.extra["keys"]["team"], STEER)
        turns = [r for r in gw.decisions() if r.get("route") == ROUTES[provider]]
        stats = await backend.stats()
    by_path, last = stats["by_path"], (stats["last_request"] or {}).get("body")
    assert result["errors"] == [] and "fatal" not in result, result
    # the tool call arrived, its input streamed in pieces, and the SDK ran the tool
    (call,) = result["toolCalls"]
    assert call["name"] == "get_weather" and call["input"] == {"city": "Paris"}
    assert result["toolResults"] == [{"id": call["id"], "output": "18C and sunny in Paris"}]
    parts = result["parts"]
    assert parts.count("tool-input-delta") > 1 and parts.index("tool-input-delta") < parts.index("tool-call")
    # the stream completed: the second step's text, then the end
    assert result["finishReasons"] == ["tool-calls", "stop"] and result["finishReason"] == "stop"
    assert parts[-1] == "finish" and result["text"] == "tok " * 16
    # two admitted turns, each on the backend once; the second carried the tool's result
    assert [(t["status"], t.get("reason")) for t in turns] == [(200, None), (200, None)]
    assert by_path == {("/v1/chat/completions" if mode == "translated" else ROUTES[provider]): 2}
    assert "18C and sunny in Paris" in json.dumps(last)
    if mode == "native" and provider == "anthropic":
        # the field that used to be refused, as the provider sends it, forwarded as parsed
        assert last["tools"][0]["eager_input_streaming"] is True
    # what the SDK added up over its two steps is what the gateway charged
    assert result["usage"]["outputTokens"] == sum(t["usage"]["completion_tokens"] for t in turns)
    assert result["usage"]["inputTokens"] == sum(t["usage"]["prompt_tokens"] for t in turns)
