"""The timing audit (issue 42): can tenant B tell, by timing its own requests, that tenant A
sent a text recently? B sends A's recent text and a fresh one, interleaved, with a
bystander's requests between A's and B's (tests/security/audit.py says why), for a 60 KB and
a 2 KB text, and a paired permutation test looks for a difference at p < 0.01. The same audit against a gateway whose memos are deliberately
shared (every request entered under one tenant) finds one on the 60 KB text: the audit can
fail.

The gateway runs every memo the issue names: token counts with an exact tokenizer
(tiktoken), the injection heuristic's and the personal-data patterns' findings, the
response cache (per tenant). Its backend is the bundled mock in this event loop
(upstream/memory.py), so a request is one ASGI call with nothing else running.

Timed inside the process, as the CPU time of the thread that serves the request
(``time.thread_time_ns``), rather than as wall time over HTTP: on a shared two-core machine
the wall time of a loopback request carries milliseconds of scheduling noise from other
processes, more than the 2 KB text's whole cost, while the thread's CPU time counts only the
work the gateway did for that request, which is exactly what a memo saves; an attacker on a
quiet network sees that difference as wall time. What the engine's own cache does is the
salt's business (test_cache_salt.py, docs/security.md).

p < 0.01 happens by chance one run in a hundred even when nothing leaks. A finding is
therefore confirmed by a second audit on fresh texts before the test fails: a real leak
(p ~ 1e-4, the smallest the permutation count can show) fails both; chance fails both one
run in 10,000.
"""

from __future__ import annotations

import gc
import time
from typing import Any

import pytest

from tests.security.audit import Rounds, Texts, interleaved, paired_permutation_p
from tokenward import memos
from tokenward.app import Gateway
from tokenward.config.loader import parse_config
from tokenward.mock.app import MockUpstream
from tokenward.upstream.memory import MemoryTransport

LEVEL = 0.01
SIZES = {"60KB": (60_000, 24), "2KB": (2_000, 60)}   # text size, rounds

CONFIG = """
upstreams:
  mock: {{base_url: "http://backend.invalid/v1", read_timeout_s: 10}}
models:
  audit-chat: {{upstream: mock, tokenizer: "tiktoken:cl100k_base", context_window: 131072}}
screening:
  policies:
    standard:
      # shadow: read and scored as ever (its memo filled), never blocking: random words from
      # Python's documentation read as instructions now and then
      injection: {{detector: heuristic, shadow: true}}
      pii: {{detector: patterns, mode: tokenize}}
cache: {{store: memory}}
plans:
  team:
    models: [audit-chat]
    max_context_tokens: 131072
    max_output_tokens: 16
    tokens_per_minute: 1000000000
    requests_per_minute: 1000000
    max_request_work: 100000000
    screening: standard
    cache: true
tenants:
  acme: {{plan: team}}
  globex: {{plan: team}}
  initech: {{plan: team}}
keystore: {{url: "sqlite:///{tmp}/keys.db"}}
logging: {{decisions: "off"}}
"""


class InProcess:
    """The gateway called as an ASGI app, each request timed by the serving thread's CPU time."""

    def __init__(self, gateway: Gateway, keys: dict[str, str]) -> None:
        self.gateway = gateway
        self.auth = {tenant: f"Bearer {key}".encode() for tenant, key in keys.items()}

    async def send(self, tenant: str, text: str) -> float:
        body = ('{"model":"audit-chat","max_tokens":4,"messages":[{"role":"user","content":"%s"}]}'
                % text).encode()
        scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "query_string": b"",
                 "headers": [(b"authorization", self.auth[tenant]), (b"content-type", b"application/json"),
                             (b"content-length", str(len(body)).encode())]}
        given = False
        status = []

        async def receive() -> dict[str, Any]:
            nonlocal given
            if not given:
                given = True
                return {"type": "http.request", "body": body, "more_body": False}
            await time_never()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            elif status != [200]:
                status.append(message.get("body", b"")[:300])   # why, in the assertion's message

        started = time.thread_time_ns()
        await self.gateway(scope, receive, send)
        took = time.thread_time_ns() - started
        assert status == [200], status
        return took / 1000.0   # microseconds


async def time_never() -> None:
    import asyncio

    await asyncio.Event().wait()


@pytest.fixture
async def gateway(tmp_path):
    built = Gateway(parse_config(CONFIG.format(tmp=tmp_path), environ={}),
                    transports={"mock": MemoryTransport(MockUpstream())})
    await built.startup()
    keys = {label: (await built.parts.keys.create(tenant))[0]
            for label, tenant in (("a", "acme"), ("b", "globex"), ("c", "initech"))}
    try:
        yield InProcess(built, keys)
    finally:
        await built.shutdown()


async def audit(gw: InProcess, size: int, rounds: int, seed: int) -> tuple[float, Rounds]:
    texts = Texts(seed)
    await interleaved(gw.send, texts, size, 3, seed + 1)        # warm: first requests pay one-time costs
    gc.collect()
    gc.disable()   # a collection lands on either label alike, but widens both: fewer rounds needed without
    try:
        timed = await interleaved(gw.send, texts, size, rounds, seed + 2)
    finally:
        gc.enable()
    return paired_permutation_p(timed.differences(), seed=seed), timed


def _report(name: str, p: float, timed: Rounds) -> str:
    recent, fresh = timed.medians()
    return f"{name}: p={p:.4g}, median CPU us: A's recent text {recent:.0f}, fresh {fresh:.0f}"


@pytest.mark.parametrize("size_name", SIZES)
async def test_tenant_b_cannot_tell_what_tenant_a_sent(gateway, size_name):
    size, rounds = SIZES[size_name]
    p, timed = await audit(gateway, size, rounds, seed=42)
    print(_report(size_name, p, timed))
    if p < LEVEL:   # one run in a hundred by chance: confirmed on fresh texts before it counts
        p, timed = await audit(gateway, size, rounds, seed=43)
        print(_report(size_name + " (again)", p, timed))
    assert p >= LEVEL, _report(size_name, p, timed)


async def test_the_audit_finds_a_memo_shared_between_tenants(gateway, monkeypatch):
    import tokenward.stages.s03_identity as identity

    monkeypatch.setattr(identity, "enter_tenant", lambda tenant: memos.enter("everyone"))   # the fault
    size, rounds = SIZES["60KB"]
    p, timed = await audit(gateway, size, rounds, seed=7)
    print(_report("60KB, memos shared", p, timed))
    recent, fresh = timed.medians()
    assert p < LEVEL and recent < fresh, _report("60KB, memos shared", p, timed)
