"""The standalone mock (``run_mock``, under uvloop) in its own process."""

from __future__ import annotations

import asyncio
import re
import sys

import httpx
import pytest
from tests.mock._mock_helpers import chat, sse_events


async def test_run_mock_prints_address_and_serves():
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "from tokenward.mock import run_mock; run_mock(port=0)",
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), 10)).decode()
        match = re.fullmatch(r"mock-upstream listening on http://127\.0\.0\.1:(\d+)\n", line)
        assert match, line
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{match[1]}", timeout=5) as client:
            resp = await client.post("/v1/chat/completions", json=chat(stream=True, max_tokens=2))
            assert sse_events(resp.text)[-1] == "[DONE]"
            with pytest.raises(httpx.HTTPError):
                await client.post("/v1/chat/completions", json=chat(stream=True), headers={"x-mock-die-after": "1"})
            with pytest.raises(httpx.HTTPError):
                await client.post("/v1/chat/completions", json=chat(), headers={"x-mock-die-after": "1"})
            stats = (await client.get("/_mock/stats")).json()
            assert stats["died"] == 2 and stats["tokens_generated"] == 4
    finally:
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), 10) is not None
