"""The mock as a batching engine with a shared throughput: ``--capacity-tokens-per-s N``.

A real engine (vLLM, llama.cpp's server with several slots) generates for all its running
requests at once, and its throughput is shared: with B streams each gets about N / B tokens
a second, so a loaded replica is slower for everyone on it. ``Engine`` models that with one
schedule per process: every token a stream produces takes the next 1/N s slot of it (so
concurrent streams interleave, each at N / B), and a request's prefill, with
``--prefill-tokens-per-s P``, takes (prompt tokens not in the prefix cache) / P s of it
before the first token (the whole engine waits meanwhile, as without chunked prefill).

The prefix cache is what engines keep of recent prompts: a chat prompt's prefixes (message
by message, as the mock counts prompt tokens: words) are remembered, least recently used
out past ``cache_tokens``; a prompt that starts with a remembered prefix prefills only the
rest. ``stats`` says what the engine did: prompt tokens, those served from the cache, and
the seconds it was busy.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any

import msgspec

_encode = msgspec.json.encode


class Engine:
    __slots__ = ("tokens_per_s", "prefill_per_s", "cache_tokens", "_next_free", "_cache", "_cached_total",
                 "prompt_tokens", "cached_tokens", "busy_s")

    def __init__(self, tokens_per_s: float, prefill_per_s: float = 0.0, cache_tokens: int = 262_144) -> None:
        if tokens_per_s <= 0:
            raise ValueError("capacity must be > 0 tokens a second")
        self.tokens_per_s = tokens_per_s
        self.prefill_per_s = prefill_per_s
        self.cache_tokens = cache_tokens
        self._next_free = 0.0
        self._cache: OrderedDict[int, int] = OrderedDict()   # prefix hash -> its tokens
        self._cached_total = 0
        self.prompt_tokens = 0
        self.cached_tokens = 0
        self.busy_s = 0.0

    async def _spend(self, seconds: float) -> None:
        """Take the next ``seconds`` of the engine's schedule, and wait for their end."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        start = max(now, self._next_free)
        self._next_free = end = start + seconds
        self.busy_s += seconds
        if end > now:
            await asyncio.sleep(end - now)

    async def generate(self, tokens: int) -> None:
        """``tokens`` tokens of one step (one per choice), at the engine's shared pace."""
        await self._spend(tokens / self.tokens_per_s)

    async def prefill(self, body: dict[str, Any]) -> None:
        """The prompt's tokens that are not in the prefix cache, at the prefill pace."""
        blocks = _prompt_blocks(body)
        total = sum(tokens for _, tokens in blocks)
        cached = self._lookup(blocks)
        self._remember(blocks)
        self.prompt_tokens += total
        self.cached_tokens += cached
        if self.prefill_per_s > 0 and total > cached:
            await self._spend((total - cached) / self.prefill_per_s)

    def _lookup(self, blocks: list[tuple[int, int]]) -> int:
        cache = self._cache
        covered = 0
        for h, tokens in blocks:
            if h not in cache:
                break
            cache.move_to_end(h)
            covered += tokens
        return covered

    def _remember(self, blocks: list[tuple[int, int]]) -> None:
        cache = self._cache
        for h, tokens in blocks:
            if h not in cache:
                cache[h] = tokens
                self._cached_total += tokens
            cache.move_to_end(h)
        while self._cached_total > self.cache_tokens and cache:
            _, tokens = cache.popitem(last=False)
            self._cached_total -= tokens

    def stats(self) -> dict[str, Any]:
        return {"capacity_tokens_per_s": self.tokens_per_s, "prefill_tokens_per_s": self.prefill_per_s,
                "prompt_tokens": self.prompt_tokens, "cached_prompt_tokens": self.cached_tokens,
                "busy_s": round(self.busy_s, 3)}

    def reset(self) -> None:
        self.prompt_tokens = self.cached_tokens = 0
        self.busy_s = 0.0


def _prompt_blocks(body: dict[str, Any]) -> list[tuple[int, int]]:
    """(the hash of the prompt up to and with this block, the block's tokens) per message
    (chat) or for the whole prompt (completions); tokens as the mock counts them: words."""
    messages = body.get("messages")
    blocks: list[tuple[int, int]] = []
    h = 0
    if isinstance(messages, list):
        for message in messages:
            content = message.get("content") if isinstance(message, dict) else None
            text = content if isinstance(content, str) else _encode(content).decode() if content else ""
            h = hash((h, message.get("role") if isinstance(message, dict) else None, text))
            blocks.append((h, len(text.split()) + 4))
        return blocks
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        blocks.append((hash(prompt), len(prompt.split())))
    return blocks
