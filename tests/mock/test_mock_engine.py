"""The mock as a batching engine (mock/engine.py): streams share its throughput, a prompt's
cached prefix is not prefilled again, and its KV cache bounds what runs at once."""

from __future__ import annotations

import asyncio
import time

import httpx

from tests.fixtures.mock_processes import MockProcess
from tokenward.mock.engine import Engine


def _chat(*texts: str) -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": t} for t in texts]}


async def test_concurrent_streams_share_the_capacity_of_one_process():
    mock = MockProcess(capacity=400)
    try:
        body = {**_chat("hi"), "stream": True, "max_tokens": 100}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{mock.port}", timeout=30) as client:
            async def one() -> float:
                started = time.monotonic()
                async with client.stream("POST", "/v1/chat/completions", json=body,
                                         headers={"x-mock-tokens": "100"}) as resp:
                    async for _ in resp.aiter_bytes():
                        pass
                return time.monotonic() - started

            alone = await one()
            together = await asyncio.gather(one(), one(), one())
        assert 0.2 < alone < 0.5                          # 100 tokens at 400 a second
        assert all(t > 2 * alone for t in together)       # three share it: each at a third
        assert mock.stats()["engine"]["busy_s"] >= 1.0
    finally:
        mock.stop()


async def test_a_cached_prefix_is_not_prefilled_again():
    engine = Engine(1000.0, prefill_per_s=2000.0)
    first = _chat("word " * 400, "question one")
    started = time.monotonic()
    await engine.prefill(first)
    cold = time.monotonic() - started
    started = time.monotonic()
    await engine.prefill(_chat("word " * 400, "question two"))
    warm = time.monotonic() - started
    assert cold > 0.19 and warm < cold / 4
    assert engine.cached_tokens == 404                    # the first message, as the mock counts it


async def test_the_prefix_cache_is_shared_only_within_one_cache_salt():
    """As vLLM's: a prompt another salt sent is prefilled in full; the same salt's is not."""
    engine = Engine(1000.0)
    prompt = _chat("word " * 400, "question")
    await engine.prefill({**prompt, "cache_salt": "a" * 64})
    await engine.prefill({**prompt, "cache_salt": "b" * 64})
    await engine.prefill(prompt)
    assert engine.cached_tokens == 0
    await engine.prefill({**_chat("word " * 400, "another"), "cache_salt": "b" * 64})
    assert engine.cached_tokens == 404
    await engine.prefill({"model": "m", "prompt": "one two", "cache_salt": "a" * 64})
    await engine.prefill({"model": "m", "prompt": "one two"})
    assert engine.cached_tokens == 404


async def test_the_kv_cache_holds_back_what_does_not_fit_first_come_first_served():
    engine = Engine(1000.0, kv_tokens=1000)
    first = await engine.admit(_chat("a " * 500), 100)
    second = asyncio.ensure_future(engine.admit(_chat("b " * 500), 100))
    third = asyncio.ensure_future(engine.admit(_chat("c"), 10))    # fits, but waits its turn
    await asyncio.sleep(0.01)
    assert not second.done() and not third.done()
    engine.leave(first)
    await asyncio.sleep(0)
    assert second.done() and third.done()
    engine.leave(second.result())
    engine.leave(third.result())
    assert engine.stats()["running"] == 0 and engine.stats()["waiting"] == 0
