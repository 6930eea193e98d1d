"""A pool of three llama.cpp servers (``llama-cpp-python[server]``, the tiny model of
tests/fixtures/llama_model.py) behind one model.

llama-cpp-python's server runs one generation at a time (``interrupt_requests: False``: the
next request waits for the lock), so a request sent to a busy replica waits for the whole
answer ahead of it: routing on the work in flight sends it to an idle one. A replica killed
with a request on it that had not started answering (a non-streamed request answers only
when its generation is done) hands that request to another, charged once; a replica started
again on its port is readmitted by its probe.

The probes wait long here (``health_timeout_s: 5``): this server answers nothing, not even
``GET /v1/models``, while it generates a non-streamed answer (docs/upstreams.md, "Health").
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.fixtures.llama_server import LlamaServer, available
from tests.support import gateway_in_process
from tests.upstream.pool_helpers import charged_tokens, eventually, records_by_id, served_by, target_gauges

pytestmark = [
    pytest.mark.skipif(not available(), reason="llama-cpp-python[server] is not installed: run scripts/llama-wheel.sh"),
    pytest.mark.timeout(120),
]

N_CTX = 4096


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from tests.fixtures.llama_model import build_model

    return build_model(tmp_path_factory.mktemp("tiny-pool-model"))


@pytest.fixture
def replicas(tiny, tmp_path):
    with ThreadPoolExecutor(3) as pool:
        servers = list(pool.map(lambda i: LlamaServer(tiny.gguf, tmp_path / f"llama-{i}.log", n_ctx=N_CTX),
                                range(3)))
    yield servers
    for server in servers:
        server.stop()


def config(tiny, servers, tmp_path) -> str:
    targets = ", ".join(f"{{url: {s.url}}}" for s in servers)
    return f"""
server: {{expose_metrics: true}}
upstreams:
  llama: {{targets: [{targets}], read_timeout_s: 60, health_interval_s: 0.5, health_timeout_s: 5,
           eject_after: 2, eject_base_s: 30}}
models:
  tiny: {{upstream: llama, tokenizer: "hf:{tiny.tokenizer}", context_window: {N_CTX}}}
plans:
  team: {{models: [tiny], max_output_tokens: 4096, tokens_per_minute: 100000000, requests_per_minute: 100000,
          max_concurrent_streams: 32}}
tenants:
  acme: {{plan: team}}
keystore: {{url: "sqlite:///{tmp_path}/keys.db"}}
logging: {{decisions: "{tmp_path}/decisions.jsonl"}}
"""


def ask(max_tokens: int, **extra) -> dict:
    return {"model": "tiny", "messages": [{"role": "user", "content": "hello the gateway"}],
            "max_tokens": max_tokens, **extra}


async def test_a_long_stream_on_one_replica_sends_the_next_requests_to_the_idle_two(tiny, replicas, tmp_path):
    async with gateway_in_process(config(tiny, replicas, tmp_path), tmp_path / "decisions.jsonl") as gw, \
            gw.client(timeout=60) as client:
        async with client.stream("POST", gw.url + "/v1/chat/completions", json=ask(1500, stream=True)) as long:
            chunks = long.aiter_bytes()
            await chunks.__anext__()
            shorts = [await client.post(gw.url + "/v1/chat/completions", json=ask(8)) for _ in range(4)]
            async for _ in chunks:
                pass
            long_id = long.headers["x-request-id"]
        records = records_by_id(gw)
    assert all(r.status_code == 200 for r in shorts)
    busy = served_by(records[long_id])
    assert records[long_id]["usage"]["completion_tokens"] == 1500   # it ran on while the others were served
    assert busy not in {served_by(records[r.headers["x-request-id"]]) for r in shorts}


async def test_a_killed_replica_hands_its_unanswered_request_on_charged_once_and_comes_back(tiny, replicas, tmp_path):
    async with gateway_in_process(config(tiny, replicas, tmp_path), tmp_path / "decisions.jsonl") as gw, \
            gw.client(timeout=60) as client:
        charged = charged_tokens(gw)
        running = [asyncio.ensure_future(client.post(gw.url + "/v1/chat/completions", json=ask(600)))
                   for _ in range(3)]
        pool = gw.gateway.parts.targets.pools["llama"]
        await eventually(lambda: all(r.requests == 1 for r in pool.replicas))
        await asyncio.sleep(0.3)                      # generating, nothing answered yet
        victim = replicas[0]
        label = f"127.0.0.1:{victim.port}"
        victim.proc.kill()
        answers = await asyncio.gather(*running)
        assert [r.status_code for r in answers] == [200, 200, 200]
        records = records_by_id(gw)
        tried = [records[r.headers["x-request-id"]]["notes"]["targets"] for r in answers]
        assert [t for t in tried if len(t) == 2] == [[label, t[1]] for t in tried if len(t) == 2] != []
        assert charged_tokens(gw) - charged == sum(r.json()["usage"]["total_tokens"] for r in answers)
        await eventually(lambda: _up(gw, label, 0))

        victim.stop()
        replicas[0] = back = LlamaServer(tiny.gguf, tmp_path / "llama-back.log", n_ctx=N_CTX, port=victim.port)
        await eventually(lambda: _up(gw, label, 1), timeout=20)
        served = []
        for _ in range(6):
            reply = await client.post(gw.url + "/v1/chat/completions", json=ask(4))
            assert reply.status_code == 200
            served.append(served_by(records_by_id(gw)[reply.headers["x-request-id"]]))
        assert label in served
        assert httpx.get(f"http://127.0.0.1:{back.port}/_stats", timeout=5).json()["by_path"].get(
            "/v1/chat/completions", 0) >= 1


async def _up(gw, target: str, value: int) -> bool:
    return (await target_gauges(gw)).get(("tokenward_upstream_target_up", target)) == value
