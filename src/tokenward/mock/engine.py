"""The mock as a batching engine with a shared throughput: ``--capacity-tokens-per-s N``.

A real engine (vLLM, llama.cpp's server with several slots) generates for all its running
requests at once, and its throughput is shared: with B streams each gets about N / B tokens
a second, so a loaded replica is slower for everyone on it. ``Engine`` models that with one
schedule per process: every token a stream produces takes the next 1/N s slot of it (so
concurrent streams interleave, each at N / B), and a request's prefill, with
``--prefill-tokens-per-s P``, takes (prompt tokens not in the prefix cache) / P s of it
before the first token (the whole engine waits meanwhile, as without chunked prefill).

With ``--kv-cache-tokens K`` the engine also holds at most K tokens of running requests (each
its prompt and the output it will write, as an engine's KV cache holds them): a request that
does not fit waits, first come first served, until enough running ones end (one alone always
runs). That is the bounded batch of a real replica: prompt tokens take room there even where
their prefill was cheap.

The prefix cache is what engines keep of recent prompts: a chat prompt's prefixes (message
by message, as the mock counts prompt tokens: words) are remembered, least recently used
out past ``cache_tokens``; a prompt that starts with a remembered prefix prefills only the
rest. As vLLM's, it is partitioned by ``cache_salt``: a prefix is shared only between requests
that carry the same salt (or none). ``stats`` says what the engine did: prompt tokens, those served from the cache, and
the seconds it was busy.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from typing import Any

import msgspec

_encode = msgspec.json.encode


class Engine:
    __slots__ = ("tokens_per_s", "prefill_per_s", "cache_tokens", "kv_tokens", "_next_free", "_cache", "_cached_total",
                 "prompt_tokens", "cached_tokens", "busy_s", "_held", "_running", "_waiting", "waited_s")

    def __init__(self, tokens_per_s: float, prefill_per_s: float = 0.0, cache_tokens: int = 262_144,
                 kv_tokens: int = 0) -> None:
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
        self.kv_tokens = kv_tokens
        self._held = 0                 # KV tokens of the running requests
        self._running = 0
        self._waiting: deque[tuple[int, asyncio.Future[None]]] = deque()
        self.waited_s = 0.0            # summed over requests: the time they queued for KV room

    async def admit(self, body: dict[str, Any], output_tokens: int) -> int:
        """Wait for room in the KV cache (``kv_tokens``); returns what to give back (``leave``)."""
        if not self.kv_tokens:
            return 0
        need = sum(tokens for _, tokens in _prompt_blocks(body)) + output_tokens
        if self._running and (self._waiting or self._held + need > self.kv_tokens):
            loop = asyncio.get_running_loop()
            started = loop.time()
            future: asyncio.Future[None] = loop.create_future()
            self._waiting.append((need, future))
            try:
                await future
            except asyncio.CancelledError:
                if future.done() and not future.cancelled():
                    self.leave(need)   # room was given to a request that left meanwhile
                else:
                    self._waiting.remove((need, future))
                raise
            finally:
                self.waited_s += loop.time() - started
        else:
            self._held += need
            self._running += 1
        return need

    def leave(self, need: int) -> None:
        if not need:
            return
        self._held -= need
        self._running -= 1
        while self._waiting:
            want, future = self._waiting[0]
            if self._running and self._held + want > self.kv_tokens:
                return
            self._waiting.popleft()
            self._held += want
            self._running += 1
            future.set_result(None)

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
                "kv_cache_tokens": self.kv_tokens, "prompt_tokens": self.prompt_tokens,
                "cached_prompt_tokens": self.cached_tokens, "busy_s": round(self.busy_s, 3),
                "queued_for_kv_s": round(self.waited_s, 3), "running": self._running, "waiting": len(self._waiting)}

    def reset(self) -> None:
        self.prompt_tokens = self.cached_tokens = 0
        self.busy_s = self.waited_s = 0.0


def _prompt_blocks(body: dict[str, Any]) -> list[tuple[int, int]]:
    """(the hash of the prompt up to and with this block, the block's tokens) per message
    (chat) or for the whole prompt (completions); tokens as the mock counts them: words.
    The chain starts from the body's ``cache_salt``: one salt's blocks are not another's."""
    messages = body.get("messages")
    blocks: list[tuple[int, int]] = []
    salt = body.get("cache_salt")
    h = hash(("salt", salt)) if isinstance(salt, str) else 0
    if isinstance(messages, list):
        for message in messages:
            content = message.get("content") if isinstance(message, dict) else None
            text = content if isinstance(content, str) else _encode(content).decode() if content else ""
            h = hash((h, message.get("role") if isinstance(message, dict) else None, text))
            blocks.append((h, len(text.split()) + 4))
        return blocks
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        blocks.append((hash((h, prompt)), len(prompt.split())))
    return blocks
