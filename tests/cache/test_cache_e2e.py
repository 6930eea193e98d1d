"""The response cache through the HTTP API, with the official ``openai`` SDK and the mock.

A hit is the cache stage's own answer: the reservation it took is given back through the
ordinary unwinding (so a tenant whose traffic is all hits never runs out of budget), the
PII restorer of *this* request runs on it, and entries never cross tenants.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import openai
import pytest
import yaml

from tests.budget.conftest import FakeClock
from tests.budget.gateway_helpers import backend, in_process
from tokenward.budget.limits import tenant_namespace
from tokenward.budget.policy import SCALE

pytestmark = pytest.mark.usefixtures("sdk_clients_closed")   # tests/conftest.py

TPM = 2_000


def config(tmp_path, mock_port: int, cache: dict | None = None, **plan) -> object:
    base = {"models": ["small-chat"], "max_output_tokens": 64, "tokens_per_minute": TPM,
            "requests_per_minute": 1_000_000, "max_concurrent_streams": 64, "max_n": 4, "allow_tools": ["lookup"],
            "cache": True, **plan}
    raw = {
        "upstreams": {"mock": {"base_url": f"http://127.0.0.1:{mock_port}/v1", "forward_headers": ["x-mock-*"],
                               "read_timeout_s": 10}},
        "models": {"small-chat": {"upstream": "mock", "context_window": 32768, "input_price_per_million": 1.0,
                                  "output_price_per_million": 2.0}},
        "screening": {"policies": {"mask": {"pii": {"mode": "tokenize"}}}},
        "plans": {"team": {**base, "screening": "mask"}, "other": base,
                  "nocache": {**base, "cache": False}},
        "tenants": {"acme": {"plan": "team"}, "globex": {"plan": "other"}, "initech": {"plan": "nocache"}},
        "cache": cache or {"store": "memory", "ttl_seconds": 600},
        "keystore": {"url": f"sqlite:///{tmp_path}/keys.db"},
        "logging": {"decisions": str(tmp_path / "decisions.jsonl"), "level": "warning"},
    }
    path = tmp_path / "tokenward.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.fixture
async def mock():
    async with backend() as b:
        yield b


@pytest.fixture
async def gw(tmp_path, mock):
    async with in_process(config(tmp_path, mock.port), clock=FakeClock()) as running:
        yield running


async def sdk(gw, tenant: str = "acme", **headers) -> openai.AsyncOpenAI:
    key = (await gw.new_key(tenant))["authorization"].split()[1]
    return openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key=key, max_retries=0, default_headers=headers)


def said(text: str = "What is the capital of France?") -> list[dict]:
    return [{"role": "user", "content": text}]


async def tokens_left(gw, tenant: str = "acme") -> int:
    value = await gw.store.value(tenant_namespace("tw", tenant) + ":b:tokens")
    return TPM if value is None else value[0] // SCALE


async def test_a_thousand_identical_requests_cost_one(gw, mock):
    """On a budget that holds ~10 reservations, 1,000 identical requests: one reaches the
    backend, 999 are hits, none is refused; the budget is down by one request's usage."""
    client = await sdk(gw)
    statuses = []
    for _ in range(1000):
        raw = await client.chat.completions.with_raw_response.create(model="small-chat", max_tokens=64,
                                                                     messages=said())
        statuses.append(raw.headers["x-tokenward-cache"])
    assert statuses[0] == "miss" and statuses.count("hit") == 999
    assert await mock.requests() == 1
    await gw.settled()
    first = (await gw.wait_decisions(1000))[0]
    assert await tokens_left(gw) == TPM - first["notes"]["budget"]["actual"]
    hits = [r for r in gw.decisions() if r.get("answered_by") == "cache"]
    assert len(hits) == 999
    assert all(r["notes"]["budget"]["refunded"] == r["notes"]["budget"]["reserved"] for r in hits)


async def test_tenants_never_share_an_entry(gw, mock):
    acme, globex = await sdk(gw, "acme"), await sdk(gw, "globex")
    await acme.chat.completions.create(model="small-chat", max_tokens=16, messages=said())
    await acme.chat.completions.create(model="small-chat", max_tokens=16, messages=said())
    assert await mock.requests() == 1
    raw = await globex.chat.completions.with_raw_response.create(model="small-chat", max_tokens=16, messages=said())
    assert raw.headers["x-tokenward-cache"] == "miss" and await mock.requests() == 2


@pytest.mark.parametrize("stream", [False, True])
async def test_two_callers_differing_only_in_their_own_email_share_one_entry(gw, mock, stream):
    ana = await sdk(gw, **{"x-mock-echo": "2"})
    bo = await sdk(gw, **{"x-mock-echo": "2"})

    async def ask(client, email: str) -> str:
        text = f"Remind me of my address {email} please"
        reply = await client.chat.completions.create(model="small-chat", max_tokens=64, messages=said(text),
                                                     stream=stream)
        if not stream:
            return reply.choices[0].message.content
        return "".join([chunk.choices[0].delta.content or "" async for chunk in reply if chunk.choices])

    first = await ask(ana, "ana@example.com")
    second = await ask(bo, "bo@example.org")
    assert first == "Remind me of my address ana@example.com please"
    assert second == "Remind me of my address bo@example.org please"
    assert await mock.requests() == 1                        # one entry, shared
    assert gw.decisions()[-1]["answered_by"] == "cache"


@pytest.mark.parametrize("stored_stream,served_stream", [(False, True), (True, False)])
async def test_streams_and_whole_answers_serve_each_other(gw, mock, stored_stream, served_stream):
    client = await sdk(gw, **{"x-mock-echo": "3"})
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]

    async def ask(stream: bool, tool: bool):
        extra = {"tools": tools} if tool else {}
        headers = {"x-mock-tool-call": "lookup"} if tool else {}
        reply = await client.chat.completions.create(model="small-chat", max_tokens=64, n=3, messages=said(),
                                                     stream=stream, extra_headers=headers, **extra,
                                                     **({"stream_options": {"include_usage": True}} if stream else {}))
        if not stream:
            return ([c.message.content for c in reply.choices],
                    [c.message.tool_calls[0].function.arguments if c.message.tool_calls else None
                     for c in reply.choices], reply.usage.completion_tokens)
        texts, args, usage = {}, {}, None
        async for chunk in reply:
            usage = chunk.usage or usage
            for c in chunk.choices:
                texts[c.index] = texts.get(c.index, "") + (c.delta.content or "")
                for call in c.delta.tool_calls or ():
                    args[c.index] = args.get(c.index, "") + (call.function.arguments or "")
        return [texts.get(i) or None for i in range(3)], [args.get(i) for i in range(3)], usage.completion_tokens

    for tool in (False, True):
        made = await ask(stored_stream, tool)
        served = await ask(served_stream, tool)
        assert served[0] == made[0] or [t or None for t in served[0]] == [t or None for t in made[0]]
        assert served[1] == made[1] and served[2] == made[2]
        if tool:
            assert json.loads(served[1][0]) == {"echo": said()[0]["content"]}
    assert await mock.requests() == 2


async def test_ttl_expiry_purge_and_cache_control(tmp_path, mock):
    path = config(tmp_path, mock.port, cache_ttl_seconds=0.3)
    async with in_process(path, clock=FakeClock()) as gw:
        client = await sdk(gw)

        async def status(**headers) -> str:
            raw = await client.chat.completions.with_raw_response.create(
                model="small-chat", max_tokens=16, messages=said(), extra_headers=headers)
            return raw.headers["x-tokenward-cache"]

        assert [await status(), await status()] == ["miss", "hit"]
        await asyncio.sleep(0.4)
        assert await status() == "miss"                       # expired
        assert await status(**{"cache-control": "no-cache"}) == "bypass"   # not looked up
        assert await status(**{"cache-control": "no-store"}) == "bypass"
        assert await status() == "hit"
        admin = gw.gateway.parts.cache
        assert (await admin.purge("acme"))["purged"] >= 1
        assert await status() == "miss"
        nocache = await sdk(gw, "initech")
        raw = await nocache.chat.completions.with_raw_response.create(model="small-chat", max_tokens=16,
                                                                      messages=said())
        assert raw.headers["x-tokenward-cache"] == "bypass"


async def test_a_cut_stream_or_an_error_is_never_stored(gw, mock):
    client = await sdk(gw)
    with pytest.raises(openai.APIError):
        stream = await client.chat.completions.create(model="small-chat", max_tokens=30, messages=said("cut"),
                                                      stream=True, extra_headers={"x-mock-die-after": "3"})
        async for _ in stream:
            pass
    with pytest.raises(openai.APIStatusError):
        await client.chat.completions.create(model="small-chat", max_tokens=30, messages=said("err"),
                                             extra_headers={"x-mock-status": "500"})
    before = await mock.requests()
    await client.chat.completions.create(model="small-chat", max_tokens=30, messages=said("cut"), stream=True)
    await client.chat.completions.create(model="small-chat", max_tokens=30, messages=said("err"))
    assert await mock.requests() == before + 2                # both misses


async def test_a_dead_redis_cache_is_a_miss_never_a_refusal(tmp_path, mock, monkeypatch):
    """The cache store killed under load: requests keep being served (as misses), nothing
    is refused, every reservation settles."""
    from tests.fixtures.redis_server import RedisServer
    monkeypatch.setenv("TOKENWARD_CACHE_KEY", "test-cache-secret")
    import tempfile

    cache_redis = RedisServer(tempfile.mkdtemp(prefix="tw-cache-"))
    cache_redis.start()
    try:
        path = config(tmp_path, mock.port, cache={"store": "redis", "url": cache_redis.url, "timeout_ms": 100},
                      tokens_per_minute=10_000_000)
        async with in_process(path) as gw:
            client = await sdk(gw)

            limit = asyncio.Semaphore(32)   # under the plan's 64 open requests

            async def one(i: int) -> str:
                async with limit:
                    raw = await client.chat.completions.with_raw_response.create(
                        model="small-chat", max_tokens=8, messages=said(f"q{i % 5}"))
                return raw.headers["x-tokenward-cache"]

            errors_before = gw.metrics.cache_errors
            warm = [await one(i) for i in range(5)]          # five entries stored
            await asyncio.sleep(0.05)                         # (written after each answer)
            first = await asyncio.gather(*(one(i) for i in range(45)))
            assert warm == ["miss"] * 5 and set(first) == {"hit"}
            # killed while 200 requests are on their way: some already looked it up
            in_flight = [asyncio.ensure_future(one(i)) for i in range(200)]
            while sum(t.done() for t in in_flight) < 20:
                await asyncio.sleep(0.001)
            cache_redis.stop()                                # SIGKILL
            during = await asyncio.gather(*in_flight)
            after = await asyncio.gather(*(one(i) for i in range(100)))
            assert set(during) <= {"hit", "miss"} and "miss" in during and set(after) == {"miss"}
            await gw.settled()
            records = gw.decisions()
            assert all(r["status"] == 200 for r in records) and len(records) == 350
            # what deploy/prometheus/alerts.yml's TokenwardCacheStoreFailing watches
            assert gw.metrics.cache_errors - errors_before >= 100
    finally:
        cache_redis.stop()


async def test_the_admin_api_purges_a_tenant(tmp_path, mock, monkeypatch):
    monkeypatch.setenv("TW_ADMIN_TOKEN", "admin-secret")
    path = config(tmp_path, mock.port)
    raw = yaml.safe_load(path.read_text())
    raw["admin"] = {"token_env": "TW_ADMIN_TOKEN"}
    path.write_text(yaml.safe_dump(raw))
    async with in_process(path, clock=FakeClock()) as gw:
        client = await sdk(gw)
        for _ in range(2):
            await client.chat.completions.create(model="small-chat", max_tokens=16, messages=said())
        assert await mock.requests() == 1
        async with httpx.AsyncClient(base_url=gw.url) as http:
            denied = await http.post("/admin/tenants/acme/cache/purge")
            assert denied.status_code == 401
            done = await http.post("/admin/tenants/acme/cache/purge",
                                   headers={"authorization": "Bearer admin-secret"})
            assert done.status_code == 200 and done.json() == {"tenant": "acme", "purged": 1}
            missing = await http.post("/admin/tenants/nobody/cache/purge",
                                      headers={"authorization": "Bearer admin-secret"})
            assert missing.status_code == 404
        await client.chat.completions.create(model="small-chat", max_tokens=16, messages=said())
        assert await mock.requests() == 2


async def test_a_newer_answer_under_the_same_key_is_served_not_a_remembered_one(gw, mock):
    """The stage remembers decoded hot entries beside the memory store; an answer stored
    again under the same key (``no-cache`` looks nothing up but stores) must replace it."""
    client = await sdk(gw)

    async def ask(tokens: int, **headers) -> tuple[str, str]:
        raw = await client.chat.completions.with_raw_response.create(
            model="small-chat", max_tokens=16, messages=said(), extra_headers={"x-mock-tokens": str(tokens), **headers})
        return raw.headers["x-tokenward-cache"], raw.parse().choices[0].message.content

    first = await ask(3)
    assert first[0] == "miss"
    assert await ask(7) == ("hit", first[1])              # the backend's answer to the first, from the cache
    fresh = await ask(5, **{"cache-control": "no-cache"})
    assert fresh[0] == "bypass" and fresh[1] != first[1]
    assert await ask(9) == ("hit", fresh[1])              # the newer answer, not the remembered one


@pytest.mark.parametrize("store", ["memory", "redis"])
async def test_an_answer_over_the_entry_cap_is_not_stored(tmp_path, mock, monkeypatch, store):
    cache = {"store": "memory", "max_entry_bytes": 400}
    if store == "redis":
        from tests.fixtures.redis_server import RedisServer
        import tempfile

        monkeypatch.setenv("TOKENWARD_CACHE_KEY", "test-cache-secret")
        server = RedisServer(tempfile.mkdtemp(prefix="tw-cache-"))
        server.start()
        cache = {"store": "redis", "url": server.url, "max_entry_bytes": 400}
    try:
        async with in_process(config(tmp_path, mock.port, cache=cache), clock=FakeClock()) as gw:
            client = await sdk(gw, "globex")
            before = gw.metrics.cache[("globex", "too_large")]

            async def status(tokens: int) -> str:
                raw = await client.chat.completions.with_raw_response.create(
                    model="small-chat", max_tokens=64, messages=said(f"say {tokens} words"),
                    extra_headers={"x-mock-tokens": str(tokens)})
                await asyncio.sleep(0.02)                 # a redis entry is written after the answer
                return raw.headers["x-tokenward-cache"]

            assert [await status(60), await status(60)] == ["miss", "miss"]   # ~500 bytes: never stored
            assert gw.metrics.cache[("globex", "too_large")] == before + 2
            assert [await status(3), await status(3)] == ["miss", "hit"]      # the control: stored
            assert await mock.requests() == 3
    finally:
        if store == "redis":
            server.stop()


async def test_cache_metrics_are_exposed(tmp_path, mock):
    path = config(tmp_path, mock.port)
    raw = yaml.safe_load(path.read_text())
    raw["server"] = {"expose_metrics": True}
    path.write_text(yaml.safe_dump(raw))
    async with in_process(path, clock=FakeClock()) as gw:
        # this gateway's own counters (seeded at zero for the configured tenants)
        before = {outcome: gw.metrics.cache[("globex", outcome)] for outcome in ("hit", "miss", "bypass")}
        saved_before = list(gw.metrics.cache_saved["globex"])
        assert before == {"hit": 0, "miss": 0, "bypass": 0} and saved_before == [0, 0.0]   # nobody else's
        client = await sdk(gw, "globex")
        for headers in ({}, {}, {}, {"cache-control": "no-cache"}):
            await client.chat.completions.create(model="small-chat", max_tokens=16, messages=said(),
                                                 extra_headers=headers)
        first = gw.decisions()[0]
        async with httpx.AsyncClient(base_url=gw.url) as http:
            text = (await http.get("/metrics")).text
    lines = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
             if line.startswith("tokenward_cache")}
    assert lines['tokenward_cache_total{outcome="hit",tenant="globex"}'] == before["hit"] + 2
    assert lines['tokenward_cache_total{outcome="miss",tenant="globex"}'] == before["miss"] + 1
    assert lines['tokenward_cache_total{outcome="bypass",tenant="globex"}'] == before["bypass"] + 1
    usage = first["notes"]["budget"]["actual"]
    assert lines['tokenward_cache_saved_tokens_total{tenant="globex"}'] == saved_before[0] + 2 * usage
    assert lines['tokenward_cache_saved_usd_total{tenant="globex"}'] > saved_before[1]
    assert lines["tokenward_cache_bytes"] > 0 and "tokenward_cache_evictions_total" in lines
    assert "tokenward_cache_store_errors_total" in lines


@pytest.mark.parametrize("stream", [False, True])
async def test_with_the_output_screen_the_cache_keeps_no_personal_data(tmp_path, mock, stream):
    """``pii.output: redact``: what the model wrote is masked before the entry is stored, so
    the cache never holds it, and a hit serves the masked answer."""
    email = "jane.doe@example.com"
    path = config(tmp_path, mock.port)
    raw = yaml.safe_load(path.read_text())
    raw["screening"]["policies"]["outscreen"] = {"pii": {"mode": "log", "output": "redact"}}
    raw["plans"]["other"]["screening"] = "outscreen"
    path.write_text(yaml.safe_dump(raw))
    async with in_process(path, clock=FakeClock()) as gw:
        client = await sdk(gw, "globex", **{"x-mock-echo": "4"})
        text = f"Write to {email} today."
        answers = []
        for _ in range(2):
            if stream:
                chunks = await client.chat.completions.create(model="small-chat", max_tokens=30, stream=True,
                                                              messages=said(text))
                answers.append("".join([c.choices[0].delta.content or "" async for c in chunks if c.choices]))
            else:
                reply = await client.chat.completions.create(model="small-chat", max_tokens=30, messages=said(text))
                answers.append(reply.choices[0].message.content)
        assert answers == ["Write to [EMAIL] today."] * 2
        assert await mock.requests() == 1                      # the second was a hit
        store = gw.gateway.parts.cache.store
        stored = [value for _, value in store._entries.values()]
        assert len(stored) == 1 and email.encode() not in stored[0] and b"[EMAIL]" in stored[0]
