"""The optional semantic cache: a paraphrase of a question already answered for this tenant
is served that answer (a plan opts in with ``cache_semantic: true``; docs/cache.md).

Only the last user message (or the completion prompt) is compared, and only between
requests that are otherwise identical: the *shape* (model, system prompt, earlier turns,
tools, every parameter but the output limit) is a keyed hash of the masked request with
that text blanked, so a paraphrase never borrows an answer given under other instructions.
Texts are compared as MiniLM embeddings (the classifier extra's encoder, screening/
classifier.py), by cosine similarity against ``threshold``; and, because embeddings put
"the price of the iPhone 15" right beside "the price of the Galaxy S24" and "safe" beside
"unsafe", a match must also have the same *signature* (cache/question_diff.py): every word
that carries meaning, with the role its preposition gives it, in any case and any clause
order. docs/cache.md has the rates measured on outside pairs, by source.

The index is per replica, in memory, per tenant (bounded, oldest out first); it holds
the embedding, the guard terms as a keyed hash, and the exact-cache key of the answer,
never text. The answer itself stays in the cache store, so an expired or purged entry is
simply a miss. The embedding runs in one worker thread within ``timeout_ms``; slower, or
failing, it is a miss.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections import OrderedDict, deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import msgspec

from ..config.schema import SemanticCacheConfig
from ..wire.request_body import RequestBody
from .key import IGNORED, encode_sorted
from .question_diff import signature

# placeholders, numbers, words with a capital anywhere (Paris, iPhone, S24), quoted strings
_GUARD = re.compile(r"\{[A-Z][A-Z_]*_\d+\}|\d+(?:[.,]\d+)*|\b[a-z]*[A-Z][\w-]*|\"[^\"]{1,80}\"|'[^']{1,80}'")
_NEGATION = re.compile(r"\b(?:not|no|never|without|none|nor|cannot)\b|n't\b|\bnon-", re.IGNORECASE)
_SENTENCE_START = re.compile(r"(?:^|[.!?]\s+)([A-Z][\w-]*)")


def question(body: RequestBody | bytes) -> tuple[str, bytes] | None:
    """(the text compared, the rest of the request in canonical form), or None when the
    request has no single text to compare (the last message is not the user's, or is not
    text)."""
    if not isinstance(body, RequestBody):
        body = RequestBody(body)
    try:
        request = dict(body.tree())   # a copy of the top level: the ignored fields are dropped
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    for field in IGNORED:
        request.pop(field, None)
    messages = request.get("messages")
    if isinstance(messages, list) and messages and isinstance(messages[-1], dict):
        last = messages[-1]
        content = last.get("content")
        if last.get("role") != "user":
            return None
        if isinstance(content, list):
            if not all(isinstance(p, dict) and p.get("type") == "text" for p in content):
                return None
            content = "".join(str(p.get("text", "")) for p in content)
        if not isinstance(content, str) or not content.strip():
            return None
        messages[-1] = {**last, "content": ""}
    elif isinstance(request.get("prompt"), str) and request["prompt"].strip():
        content = request["prompt"]
        request["prompt"] = ""
    else:
        return None
    return content, encode_sorted(request)


def guard_terms(text: str) -> tuple[str, ...]:
    """The guard before question_diff.signature (kept for bench/cache_pairs_eval.py's
    comparison): numbers, placeholders, quoted strings, negations, and capitalized words
    not merely starting a sentence."""
    starts = {m.start(1) for m in _SENTENCE_START.finditer(text)}
    terms = []
    for m in _GUARD.finditer(text):
        term = m.group()
        if term == "I" or (term[0].isupper() and m.start() in starts):
            continue    # "What", "How": a sentence's first word says nothing of its subject
        terms.append(term.lower())
    terms += [m.group().lower() for m in _NEGATION.finditer(text)]
    return tuple(sorted(set(terms)))


class Match(NamedTuple):
    key: str              # the exact-cache key of the answer
    similarity: float


class _Shape:
    __slots__ = ("vectors", "keys", "guards", "matrix")

    def __init__(self) -> None:
        self.vectors: list[Any] = []         # numpy vectors (numpy comes with the extra)
        self.keys: list[str] = []
        self.guards: list[bytes] = []
        self.matrix: Any = None


class SemanticIndex:
    def __init__(self, cfg: SemanticCacheConfig, secret: bytes, encoder: Any) -> None:
        import numpy

        self._np = numpy
        self.cfg = cfg
        self.encoder = encoder
        self._hasher = hashlib.blake2b(key=secret, digest_size=16, person=b"tw-semantic")
        self._tenants: dict[str, tuple[OrderedDict[bytes, _Shape], deque[tuple[bytes, str]]]] = {}   # per tenant: shapes, (shape, key) oldest first
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tw-semantic")

    def _hash(self, *parts: bytes) -> bytes:
        h = self._hasher.copy()
        for part in parts:
            h.update(len(part).to_bytes(4, "big"))
            h.update(part)
        return h.digest()

    async def embed(self, text: str) -> Any:
        """The text's embedding, or None (too slow or failed: the caller misses)."""
        loop = asyncio.get_running_loop()
        try:
            vectors = await asyncio.wait_for(loop.run_in_executor(self._pool, self.encoder.embed, [text]),
                                             self.cfg.timeout_ms / 1000)
        except Exception:   # a timeout or a failing model is a miss, never a refusal
            return None
        return vectors[0]

    def probe(self, tenant: str, text: str, rest: bytes) -> tuple[bytes, bytes]:
        """(shape, guard) hashes of a request: where it is indexed, and the question's
        signature, which a match must share word for word."""
        tenant_b = tenant.encode()
        return (self._hash(b"shape", tenant_b, rest),
                self._hash(b"guard", tenant_b, "\0".join(signature(text)).encode()))

    def find(self, tenant: str, shape: bytes, guard: bytes, vector: Any) -> Match | None:
        held = self._tenants.get(tenant)
        found = held[0].get(shape) if held is not None else None
        if found is None or not found.keys:
            return None
        if found.matrix is None:
            found.matrix = self._np.stack(found.vectors)
        scores = found.matrix @ vector
        for i in self._np.argsort(-scores)[:8]:      # the closest first; a guard mismatch looks further
            if scores[i] < self.cfg.threshold:
                return None
            if found.guards[i] == guard:
                return Match(found.keys[i], float(scores[i]))
        return None

    def add(self, tenant: str, shape: bytes, guard: bytes, vector: Any, key: str) -> None:
        held = self._tenants.get(tenant)
        if held is None:
            held = self._tenants[tenant] = (OrderedDict(), deque())
        shapes, order = held
        found = shapes.get(shape)
        if found is None:
            found = shapes[shape] = _Shape()
        if key in found.keys:
            return
        found.vectors.append(vector)
        found.keys.append(key)
        found.guards.append(guard)
        found.matrix = None
        order.append((shape, key))
        while len(order) > self.cfg.max_entries:
            self._drop(shapes, *order.popleft())

    def forget(self, tenant: str, shape: bytes, key: str) -> None:
        """An indexed answer the store no longer has (expired, purged, evicted)."""
        held = self._tenants.get(tenant)
        if held is not None:
            self._drop(held[0], shape, key)

    def purge(self, tenant: str) -> None:
        self._tenants.pop(tenant, None)

    @staticmethod
    def _drop(shapes: OrderedDict[bytes, _Shape], shape: bytes, key: str) -> None:
        found = shapes.get(shape)
        if found is None or key not in found.keys:
            return
        i = found.keys.index(key)
        for column in (found.vectors, found.keys, found.guards):
            del column[i]
        found.matrix = None
        if not found.keys:
            del shapes[shape]

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def load(cfg: SemanticCacheConfig, secret: bytes) -> SemanticIndex:
    """The index with its encoder (raises ImportError without the classifier extra)."""
    from ..screening.classifier import load_encoder

    return SemanticIndex(cfg, secret, load_encoder(cfg.runtime))
