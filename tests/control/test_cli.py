"""The CLI's operator controls against a gateway's config (no Redis: the change lands in the
key store's database, where a running gateway polls it): precise errors with exit 2 and
nothing recorded, or the change and its audit record."""

from __future__ import annotations

import asyncio
import json

from typer.testing import CliRunner

from tokenward.cli.main import app

from .conftest import bearer, chat, gateway, tools_chat, write_config


def _run(*args: str):
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_bad_requests_exit_2_and_record_nothing(tmp_path):
    config = str(write_config(tmp_path, 1))
    cases = [
        (["tenants", "pause", "acme", "video", "--for", "1h", "--reason", "r"], "capability must be"),
        (["tenants", "pause", "nobody", "tools", "--for", "1h", "--reason", "r"], "no tenant 'nobody'"),
        (["tenants", "pause", "acme", "tools", "--for", "soon", "--reason", "r"], "--for: invalid duration"),
        (["tenants", "resume", "acme", "tools", "--reason", "r"], "tools is not paused"),
        (["abuse", "reinstate", "--tenant", "acme", "--reason", "r"], "no abuse action is in force"),
        (["abuse", "act", "ban", "--tenant", "acme", "--reason", "r"], "action must be one of"),
        (["abuse", "exempt", "--reason", "r", "--for", "1d"], "name a key"),
        (["abuse", "reinstate", "--tenant", "acme", "--reason", "r", "--appeal", "maybe"], "appeal must be"),
    ]
    for args, message in cases:
        code, _, err = _run(*args, "--config", config)
        assert code == 2 and message in err, (args, code, err)
    code, out, _ = _run("tenants", "controls", "--history", "--json", "--config", config)
    assert code == 0 and out == ""


async def test_a_cli_pause_reaches_a_gateway_without_redis(tmp_path, backend):
    config = write_config(tmp_path, backend.port, control={"poll_s": 0.1})
    async with gateway(config) as gw:
        key = bearer(await gw.new_key())
        code, out, err = await asyncio.to_thread(_run, "tenants", "pause", "acme", "tools", "--for", "10m",
                                                 "--reason", "incident", "--reviewer", "dana", "--config", str(config))
        assert code == 0, err
        assert "paused tools for tenant acme" in out and "within control.poll_s" in out
        for _ in range(50):
            resp = await gw.client.post("/v1/chat/completions", json=tools_chat(), headers=key)
            if resp.status_code == 403:
                break
            await asyncio.sleep(0.05)
        assert resp.json()["error"]["code"] == "capability_paused"
        assert (await gw.client.post("/v1/chat/completions", json=chat(), headers=key)).status_code == 200
        code, out, _ = await asyncio.to_thread(_run, "tenants", "controls", "acme", "--json", "--config", str(config))
        rows = [json.loads(line) for line in out.splitlines()]
        assert [(r["kind"], r["capability"], r["by"], r["reason"]) for r in rows] == [
            ("pause", "tools", "dana", "incident")]


async def test_cli_resume_and_cancel_streams_reach_a_gateway(tmp_path, backend):
    """The success paths: a CLI resume lifts the pause, and a CLI cancel-streams ends the
    tenant's open stream on the running gateway (both through the key store's database,
    picked up within control.poll_s); each leaves an audit row."""
    import time

    import httpx

    from .test_cancel_streams import SLOW, wait_for

    config = write_config(tmp_path, backend.port, control={"poll_s": 0.1})
    async with gateway(config) as gw:
        key = bearer(await gw.new_key())
        code, _, err = await asyncio.to_thread(_run, "tenants", "pause", "acme", "tools", "--for", "10m",
                                               "--reason", "incident", "--config", str(config))
        assert code == 0, err

        async def tools_status() -> int:
            return (await gw.client.post("/v1/chat/completions", json=tools_chat(), headers=key)).status_code

        await wait_for(lambda: _is(tools_status, 403))
        code, out, err = await asyncio.to_thread(_run, "tenants", "resume", "acme", "tools", "--reason", "fixed",
                                                 "--reviewer", "dana", "--config", str(config))
        assert code == 0 and "resumed tools for tenant acme (1 pause(s) cleared" in out, (out, err)
        await wait_for(lambda: _is(tools_status, 200))

        lines: list[str] = []
        async with httpx.AsyncClient(timeout=20) as client:
            async def stream() -> float:
                body = chat(max_tokens=8000, stream=True)
                async with client.stream("POST", gw.url + "/v1/chat/completions", json=body,
                                         headers={**key, **SLOW}) as resp:
                    async for line in resp.aiter_lines():
                        if line.startswith("data: "):
                            lines.append(line[6:])
                return time.monotonic()

            task = asyncio.ensure_future(stream())

            async def streaming() -> bool:
                return (await backend.stats())["active_streams"] == 1 and bool(lines)
            await wait_for(streaming)
            before = await backend.stats()
            code, out, err = await asyncio.to_thread(_run, "tenants", "cancel-streams", "acme", "--reason", "abuse",
                                                     "--config", str(config))
            asked = time.monotonic()
            assert code == 0, err
            ended = await asyncio.wait_for(task, 5)
        assert ended - asked < 1.0                       # within a poll of the control table
        assert json.loads(lines[-1])["error"]["code"] == "stream_cancelled"
        assert (await backend.stats())["cancelled"] == before["cancelled"] + 1
        code, out, _ = await asyncio.to_thread(_run, "tenants", "controls", "acme", "--history", "--json",
                                               "--config", str(config))
        kinds = [json.loads(line)["kind"] for line in out.splitlines()]
        assert "pause" in kinds and "cancel_streams" in kinds


async def _is(probe, status: int) -> bool:
    return await probe() == status
