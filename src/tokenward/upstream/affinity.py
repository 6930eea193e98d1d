"""Prefix affinity: send a request where its prompt's beginning was sent last, so the
engine's prefix cache (vLLM's automatic prefix caching, llama.cpp's prompt reuse) is hit.

A prompt's prefixes are hashed on the boundaries the gateway already counts tokens on:
each chat message (its role, its text and parts, an assistant's tool calls), or each
2,048-character block of a completions prompt. The hash of the first k blocks chains the
hash of the first k - 1 with block k, seeded per tenant and per ``cache_salt`` where the
upstream salts (``affinity_seed``), so:

- an agent's next turn (the same system prompt and earlier turns, then the answer and a new
  message) finds the chain of its previous request among its own prefixes, at depth n - 2;
- two sessions with one system prompt meet at depth 1;
- one tenant's prefix never steers another tenant's request: what one tenant sent never
  makes another's faster (an engine without ``cache_salt`` shares its cache by content
  anyway: docs/security.md);
- on a salted upstream, a prefix steers only requests with the same salt: those the engine
  lets share its cache blocks.

Hashes are Python's own (SipHash keyed per process): nothing of a prompt is kept, and a
client cannot aim at another prefix's entry. Each process keeps its own table, bounded
(``AffinityTable.MAX_ENTRIES``, least recently used out first).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Generic, TypeVar

import msgspec

from ..validation.schemas import AssistantMessage, ChatCompletionRequest, CompletionRequest, Message, TextPart

if TYPE_CHECKING:
    from ..pipeline.context import RequestContext

T = TypeVar("T")
BLOCK_CHARS = 2048
_encode = msgspec.json.encode


def affinity_seed(ctx: RequestContext, salt: bytes | None = None) -> int:
    """Where a request's prefix chain starts: its tenant, and the ``cache_salt`` it is sent
    with when its upstream salts (upstream/salt.py).

    The engine shares cache blocks only between requests with one salt, so affinity keys on
    the salt the body carries (the tenant's or the key's, a client's own folded in) as well as
    the tenant: two keys of one tenant under ``cache_salt: key``, or two client salts of one
    tenant, then stay apart here as they do in the engine, and no prefix is sent toward a
    cache it cannot use. Two tenants never share a chain, salted or not. ``prepare`` applies
    the salt before the forward step picks a target, so the salt it wrote is known by then.
    """
    principal = ctx.principal
    tenant = principal.tenant if principal is not None else ""
    return hash(("salt", tenant, salt)) if salt else hash(("tenant", tenant))


def prefix_chain(ctx: RequestContext, seed: int) -> list[int]:
    """The hashes of the request's prompt prefixes, shortest first; empty when the request
    has no prompt to match (embeddings, a list of prompts, no validated body)."""
    request = ctx.request
    if request is None:
        return []
    body = request.body
    chain: list[int] = []
    h = seed
    if isinstance(body, ChatCompletionRequest):
        for message in body.messages:
            h = hash((h, type(message), _message_key(message)))
            chain.append(h)
    elif isinstance(body, CompletionRequest) and isinstance(body.prompt, str):
        prompt = body.prompt
        for start in range(0, len(prompt), BLOCK_CHARS):
            h = hash((h, prompt[start:start + BLOCK_CHARS]))
            chain.append(h)
    return chain


def _message_key(message: Message) -> object:
    content = message.content
    key: object = None   # no content (an assistant turn of tool calls only)
    if type(content) is str:
        key = content
    elif isinstance(content, list):
        key = tuple(part.text if isinstance(part, TextPart) else _encode(part) for part in content)
    if isinstance(message, AssistantMessage) and message.tool_calls:
        return key, _encode(message.tool_calls)
    return key


class AffinityTable(Generic[T]):
    """Prefix hash -> the target that served it last, least recently used out first."""

    MAX_ENTRIES = 32_768
    __slots__ = ("_entries", "hits", "moved", "fresh")

    def __init__(self) -> None:
        self._entries: OrderedDict[int, T] = OrderedDict()
        self.hits = 0      # sent where its prefix was
        self.moved = 0     # its prefix's target was too loaded (or out): balanced instead
        self.fresh = 0     # no prefix of it known here

    def holder(self, chain: list[int]) -> T | None:
        """The target of the longest known prefix of ``chain``."""
        entries = self._entries
        for h in reversed(chain):
            target = entries.get(h)
            if target is not None:
                entries.move_to_end(h)
                return target
        return None

    def record(self, chain: list[int], target: T) -> None:
        """``target`` now holds the whole prompt, and its first block (a system prompt)."""
        if not chain:
            return
        entries = self._entries
        for h in {chain[0], chain[-1]}:
            entries[h] = target
            entries.move_to_end(h)
        while len(entries) > self.MAX_ENTRIES:
            entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
