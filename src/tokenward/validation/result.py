"""What validation leaves for the stages after it: the normalized, bounded request."""

from __future__ import annotations

from typing import Any

import msgspec

from .findings import Findings as Findings   # its home before it was compiled (tokenward/compiled.py)


class NormalizedRequest(msgspec.Struct, frozen=True):
    """The validation stage's result (``ctx.request``).

    ``body`` is the typed request (a ``schemas`` Struct) holding the normalized text,
    exactly what is forwarded; later stages read it and never change it.
    """

    route: str                        # "chat" | "completions" | "embeddings"
    model: str
    body: Any
    outer_items: int = 1
    candidates: int = 1               # max(n, best_of)
    max_output_tokens: int = 0        # clamped, per choice; 0 for embeddings
    stream: bool = False
    structured_output: bool = False
    attachments: tuple[Any, ...] = ()
    attachment_tokens: int = 0        # upper bound of what the attachments add
    extra_raw: tuple[bytes, ...] = ()
    embed_tokens: tuple[int, ...] = ()  # per prompt_embeds entry (each is an outer item)
    hidden_characters: int = 0        # stripped
    normalized_texts: int = 0         # texts changed by normalization
    clamped: tuple[tuple[str, int], ...] = ()  # (field, value the client asked for)
    changed: bool = False             # the forwarded body differs from the client's
    # The output bound the gateway wrote into the body (plan default or clamp), 0 if none:
    # the answer says it in x-tokenward-max-tokens.
    max_tokens_set: int = 0
    max_tokens_defaulted: bool = False
    # what later stages ask of the body, read once here whatever the route's schema
    include_usage: bool = False       # stream_options.include_usage
    echoes_prompt: bool = False       # the answer repeats the prompt (echo, vLLM prompt_logprobs)
    logprobs: bool = False            # the answer carries log probabilities
    best_of: int = 0                  # best_of as asked (completions), 0 when absent
