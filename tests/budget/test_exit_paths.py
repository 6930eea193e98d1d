"""Every way a request ends leaves zero outstanding reservations and slots, settled right.

The clock is frozen, so the token bucket shows exactly what each exit was charged:
known usage is charged as used, work the backend never saw is refunded whole, and
unknown usage keeps the full reservation.
"""

from __future__ import annotations

import asyncio

import orjson
import pytest

from tokenward.budget.limits import tenant_namespace
from tokenward.budget.policy import SCALE
from tokenward.errors import Reason, Refusal
from tokenward.pipeline.stage import BaseStage
from tokenward.stages import order

from .conftest import FakeClock
from .gateway_helpers import backend, budget_config, chat, in_process

TPM = 5000
NS = tenant_namespace("tw", "acme")


class RefuseOnHeader(BaseStage):
    """Test-only: a later stage (in the screening slot) that refuses when asked to."""

    name = "screening"

    async def admit(self, ctx):
        if ctx.header(b"x-test-refuse") is not None:
            return Refusal(Reason.content_blocked, "refused by a later stage")
        return None


def build_refuser():
    return RefuseOnHeader()


@pytest.fixture(params=["memory", "redis"])
async def gw(request, tmp_path):
    url = "memory" if request.param == "memory" else request.getfixturevalue("redis_server").url
    async with backend() as mock:
        config = budget_config(tmp_path, mock.port, url, tpm=TPM, max_output=200)
        async with in_process(config, clock=FakeClock(), stages=order.replaced("screening", build_refuser)) as running:
            running.mock = mock
            running.key = await running.new_key()
            yield running


async def tokens_left(gw) -> int:
    value = await gw.store.value(NS + ":b:tokens")
    return TPM if value is None else value[0] // SCALE


async def last_budget_note(gw, count: int) -> dict:
    return (await gw.wait_decisions(count))[-1]["notes"]["budget"]


async def test_success_charges_the_reported_usage(gw):
    resp = await gw.client.post("/v1/chat/completions", json=chat(max_tokens=50), headers=gw.key)
    assert resp.status_code == 200
    usage = resp.json()["usage"]
    await gw.settled()
    note = await last_budget_note(gw, 1)
    assert note["actual"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert note["refunded"] == note["reserved"] - note["actual"] and note["settle"] == "usage"
    assert await tokens_left(gw) == TPM - note["actual"]


async def test_streamed_success_charges_the_streamed_usage(gw):
    body = chat(max_tokens=50, stream=True)
    async with gw.client.stream("POST", "/v1/chat/completions", json=body, headers=gw.key) as resp:
        assert resp.status_code == 200
        text = (await resp.aread()).decode()
    assert "[DONE]" in text
    await gw.settled()
    note = await last_budget_note(gw, 1)
    assert note["settle"] == "usage" and await tokens_left(gw) == TPM - note["actual"]


async def test_later_stage_refusal_refunds_everything(gw):
    resp = await gw.client.post("/v1/chat/completions", json=chat(), headers={**gw.key, "x-test-refuse": "1"})
    assert resp.status_code == 400 and resp.json()["error"]["code"] == "content_blocked"
    assert await gw.mock.requests() == 0
    await gw.settled()
    assert await tokens_left(gw) == TPM
    assert (await last_budget_note(gw, 1))["refunded"] > 0


async def test_backend_error_refunds_everything(gw):
    resp = await gw.client.post("/v1/chat/completions", json=chat(), headers={**gw.key, "x-mock-status": "500"})
    assert resp.status_code == 502 and resp.json()["error"]["code"] == "upstream_error"
    await gw.settled()
    assert await tokens_left(gw) == TPM


async def test_backend_dying_mid_stream_charges_what_was_streamed(gw):
    body = chat(max_tokens=100, stream=True)
    headers = {**gw.key, "x-mock-die-after": "3", "x-mock-tokens": "50"}
    async with gw.client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as resp:
        await resp.aread()
    await gw.settled()
    note = await last_budget_note(gw, 1)
    assert note["settle"] in ("usage", "full")
    charged = note["reserved"] - note["refunded"]
    assert await tokens_left(gw) == TPM - charged


async def test_idle_timeout_mid_stream_settles(gw):
    body = chat(max_tokens=100, stream=True)
    headers = {**gw.key, "x-mock-stall-after": "2", "x-mock-tokens": "50"}
    async with gw.client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as resp:
        text = (await resp.aread()).decode()
    assert "stream_idle_timeout" in text
    await gw.settled()
    note = await last_budget_note(gw, 1)
    assert await tokens_left(gw) == TPM - (note["reserved"] - note["refunded"])


async def test_client_disconnect_mid_stream_charges_what_was_counted(gw):
    """A client that leaves mid-stream pays for the prompt and the tokens counted so far,
    not the whole reservation (it used to keep the full charge)."""
    host, port = gw.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    body = orjson.dumps(chat(max_tokens=200, stream=True))
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nauthorization: {gw.key['authorization']}\r\n"
            f"x-mock-token-rate: 20\r\nx-mock-tokens: 200\r\n\r\n")
    writer.write(head.encode() + body)
    await writer.drain()
    assert (await reader.readuntil(b"data: ")).startswith(b"HTTP/1.1 200")
    writer.close()
    await gw.settled()
    note = await last_budget_note(gw, 1)
    assert note["settle"] == "usage" and note["refunded"] > 0
    # what was counted: the prompt plus at most the few tokens sent before the close
    assert note["estimated_input"] <= note["actual"] <= note["estimated_input"] + 3
    assert await tokens_left(gw) == TPM - note["actual"]


async def test_backend_unreachable_refunds_everything(tmp_path):
    async with backend() as mock:
        port = mock.port
    config = budget_config(tmp_path, port, "memory", tpm=TPM)   # nothing listens there any more
    async with in_process(config, clock=FakeClock(), stages=order.replaced("screening", build_refuser)) as running:
        key = await running.new_key()
        resp = await running.client.post("/v1/chat/completions", json=chat(), headers=key)
        assert resp.status_code == 502 and resp.json()["error"]["code"] == "upstream_unavailable"
        await running.settled()
        assert await tokens_left(running) == TPM


async def test_a_backend_lost_after_the_request_was_sent_keeps_the_charge(tmp_path):
    """The backend reads the request and drops the connection without answering: it may
    have started generating, so the request is neither resent nor refunded as if nothing
    ran (a connect error, which the gateway refunds, used to be reported here)."""
    received = []

    async def swallow(reader, writer):
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length")))
        received.append(await reader.readexactly(length))
        writer.transport.abort()

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        config = budget_config(tmp_path, port, "memory", tpm=TPM)
        async with in_process(config, clock=FakeClock(), stages=order.replaced("screening", build_refuser)) as running:
            key = await running.new_key()
            resp = await running.client.post("/v1/chat/completions", json=chat(), headers=key)
            assert resp.status_code == 502 and resp.json()["error"]["code"] == "upstream_unavailable"
            await running.settled()
            note = await last_budget_note(running, 1)
            assert note["settle"] == "full" and note["refunded"] == 0
            assert await tokens_left(running) == TPM - note["reserved"]
            assert len(received) == 1          # sent once, never again
    finally:
        server.close()


async def test_refused_before_admission_reserves_nothing(gw):
    resp = await gw.client.post("/v1/chat/completions", json=chat(), headers={"authorization": "Bearer tw_nope"})
    assert resp.status_code == 401
    assert await gw.store.value(NS + ":b:tokens") is None
    assert await gw.mock.requests() == 0
