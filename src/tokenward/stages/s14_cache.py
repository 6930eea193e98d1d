"""Cache: a per-tenant response cache, keyed on the masked request (cache/key.py).

Runs after admission, screening and transform, for plans with ``cache: true``:

- a **hit** is this stage's own answer (the runner's answer exit): what admission took is
  given back through the ordinary unwinding (a hit costs the tenant nothing), the answer
  goes out through the response transforms registered before this stage (the PII
  restorer turns placeholders into *this* caller's values), whole or as a stream,
  whichever the request asks, and the record says ``answered_by: cache``;
- a **miss** registers a capture transform that assembles the backend's masked answer as
  it passes, and holds it: ``on_complete`` stores it only if the request completed with
  a 200 and every choice finished (never a stream cut short, an error, or content the
  cache could not replay); ``on_abort`` drops it;
- a **bypass**: the plan does not opt in, the route is not chat or completions,
  ``Cache-Control: no-cache`` (no lookup; the answer is still stored) or ``no-store``
  (neither), or log probabilities were asked for.

Every admitted response says which in ``x-tokenward-cache``. The store failing is a
miss, counted, never a refusal.
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
from typing import TYPE_CHECKING, Any, Callable

import msgspec

from ..cache.entry import CacheEntry, StreamAssembly, from_body
from ..cache.key import KeyMaker, tenant_prefix
from ..cache.semantic import SemanticIndex, question
from ..cache.store import CacheStore, CacheUnavailable, MemoryCache, RedisCache
from ..config.content import SemanticCacheConfig
from ..config.schema import CacheConfig, Config
from ..errors import ConfigError
from ..http.responses import JSON, SSE_HEADERS
from ..observe.metrics import GatewayMetrics
from ..pipeline.closers import Closers
from ..pii.output import OutputRedactor
from ..pipeline.context import required
from ..pipeline.stage import BaseStage, Exit, ExitKind
from ..reconcile.usage import NOTHING_USED, Usage
from ..wire.chunks import parsed
from ..validation.result import NormalizedRequest
from ..wire.codec import msgpack_encode as _encode_entry

if TYPE_CHECKING:
    from ..pipeline.context import RequestContext
    from ..pipeline.outbound import Outbound
    from ..wire.sse import SseEvent

log = logging.getLogger("tokenward.cache")
HEADER = b"x-tokenward-cache"
_HIT, _MISS, _BYPASS = ((HEADER, value) for value in (b"hit", b"miss", b"bypass"))
_decode_entry = msgspec.msgpack.Decoder(CacheEntry).decode

_LIMIT = struct.Struct(">i")
_MEMO_ENTRIES, _MEMO_BYTES = 1024, 8 << 20   # decoded hot entries kept beside the memory store
# a stored answer as the stage knows it: (the stored value, its entry, the tokens it saves)
Found = tuple[bytes, CacheEntry, int]
# what indexes an answer in the semantic cache: (shape, guard, the question's embedding)
Indexed = tuple[bytes, bytes, Any]


def _stored(raw: bytes) -> CacheEntry | None:
    """An entry from its stored form: b"E" + a packed entry (assembled from a stream), or
    b"B" + the request's limit + the backend's whole answer. None if unreadable."""
    kind = raw[:1]
    try:
        if kind == b"E":
            return _decode_entry(raw[1:])
        if kind == b"B":
            limit = _LIMIT.unpack_from(raw, 1)[0]
            return from_body(raw[5:], limit if limit >= 0 else None)
    except (msgspec.DecodeError, struct.error):
        return None
    return None


class Capture:
    """A miss's response transform: sees the backend's (masked) answer, changes nothing,
    and carries what ``on_complete`` needs to store it (``ctx.cache``)."""

    __slots__ = ("key", "limit", "ttl", "semantic", "body", "stream")

    def __init__(self, key: str, limit: int | None, ttl: float, semantic: Indexed | None) -> None:
        self.key = key
        self.limit = limit
        self.ttl = ttl
        self.semantic = semantic    # what indexes the answer in the semantic cache, if on
        self.body: bytes | None = None
        self.stream: StreamAssembly | None = None

    def whole(self, body: bytes) -> bytes:
        self.body = body
        return body

    def events(self, events: list[SseEvent]) -> list[SseEvent]:
        stream = self.stream
        if stream is None:
            stream = self.stream = StreamAssembly()
        for event in events:
            chunk = parsed(event)
            if chunk is not None:
                stream.add(chunk)
        return events

    def finish(self) -> list[SseEvent]:
        return []

    def close(self, tail: bytes) -> bytes:
        return tail


class Hit:
    """The cache's answer to one request."""

    __slots__ = ("entry",)

    def __init__(self, entry: CacheEntry) -> None:
        self.entry = entry

    async def deliver(self, ctx: RequestContext, out: Outbound) -> Exit:
        entry = self.entry
        ctx.status = 200
        headers = [(b"x-request-id", ctx.request_id.encode())]
        if ctx.stream:
            wants_usage = required(ctx.request, "request").include_usage
            await out.start_stream(200, SSE_HEADERS + headers)
            await out.events(entry.events(ctx.request_id, wants_usage))
            await out.end_stream(b"data: [DONE]\n\n")
        else:
            await out.whole(200, [JSON, *headers], entry.body(ctx.request_id))
        return Exit(ExitKind.COMPLETED, None, NOTHING_USED)


class CacheStage(BaseStage):
    name = "cache"
    needs = frozenset({"principal", "request"})
    writes = frozenset({"cache"})
    holds = True

    def __init__(self, cfg: CacheConfig, store: CacheStore, secret: bytes, prefix: str,
                 prices: dict[str, tuple[float, float]], metrics: GatewayMetrics | None = None) -> None:
        self.cfg = cfg
        self.metrics = metrics if metrics is not None else GatewayMetrics()   # the gateway's (services.py)
        self.store = store
        self.secret = secret
        self.keep_store = False   # handed over to the gateway that replaced this one
        self._key = KeyMaker(secret, prefix)
        self._prefix = prefix
        self._prices = prices
        self._writes: set[asyncio.Task[None]] = set()
        # key -> (stored value, its entry, tokens): the memory store hands back the very
        # value it holds, so a hot entry is decoded once, not on every hit (the identity
        # check keeps it exact: a new answer under the key is a new object). Bounded.
        self._decoded: dict[str, Found] = {}
        self._decoded_bytes = 0
        memory = store if isinstance(store, MemoryCache) else None
        self._memo = memory is not None
        self.semantic: SemanticIndex | None = None   # cache/semantic.py's index, when a plan opts in
        self.output_screens = False  # some screening policy redacts what the model writes
        # the memory store's own: no I/O, so no coroutine or task per request
        self._peek = memory.peek if memory is not None else None
        self._put = memory.put if memory is not None else None

    async def admit(self, ctx: RequestContext) -> Hit | None:
        plan = ctx.plan
        request = ctx.request
        if (not plan.cache or not isinstance(request, NormalizedRequest) or request.route == "embeddings"
                or request.logprobs):
            self._bypass(ctx)
            return None
        control = ctx.header(b"cache-control")
        # looked into only when sent: ``b".." in`` tries its argument as an int first and
        # raises and clears a TypeError every time, even on b""
        if control is not None:
            control = control.lower()
            if b"no-store" in control:
                self._bypass(ctx)
                return None
        tenant = required(ctx.principal, "principal").tenant
        screening = ctx.screening
        key, limit = self._key(tenant, ctx.parsed, None if screening is not None and screening.rewrites else request.body)
        note: dict[str, object] = {"outcome": "miss"}
        ctx.note("cache", note)
        semantic = None
        if control is not None and b"no-cache" in control:
            ctx.response_headers.append(_BYPASS)
            self.metrics.cached(tenant, "bypass")
        else:
            if self._peek is not None:
                raw = self._peek(key)
                found = self._known(key, raw) if raw is not None else None
            else:
                found = await self._lookup(key, note)
            if found is not None and found[1].serves(limit):
                return self._hit(ctx, tenant, found, note, "hit")
            if plan.cache_semantic and self.semantic is not None:
                semantic, found = await self._paraphrase(ctx, tenant, limit, note)
                if found is not None:
                    return self._hit(ctx, tenant, found, note, "semantic_hit")
            ctx.response_headers.append(_MISS)
            self.metrics.cached(tenant, "miss")
        ctx.cache = capture = Capture(key, limit, plan.cache_ttl_seconds or self.cfg.ttl_seconds, semantic)
        ctx.add_transform(capture)
        return None

    def _hit(self, ctx: RequestContext, tenant: str, found: Found, note: dict[str, object], outcome: str) -> Hit:
        _, entry, tokens = found
        ctx.response_headers.append(_HIT)
        note["outcome"] = "hit"
        note["saved_tokens"] = tokens
        self.metrics.cached(tenant, outcome, tokens, self._cost(ctx.model, entry))
        return Hit(entry)

    async def _paraphrase(self, ctx: RequestContext, tenant: str, limit: int | None,
                          note: dict[str, object]) -> tuple[Indexed | None, Found | None]:
        """(what indexes this request once answered, or None; a paraphrase's entry, or None)."""
        index = self.semantic
        asked = question(ctx.parsed) if index is not None else None
        if index is None or asked is None:
            return None, None
        shape, guard = index.probe(tenant, *asked)
        vector = await index.embed(asked[0])
        if vector is None:
            note["semantic"] = "unavailable"
            return None, None
        match = index.find(tenant, shape, guard, vector)
        if match is not None:
            found = await self._lookup(match.key, note)
            if found is not None and found[1].serves(limit):
                note["semantic"] = round(match.similarity, 4)
                return None, found
            if found is None:
                index.forget(tenant, shape, match.key)
        return (shape, guard, vector), None

    def _bypass(self, ctx: RequestContext) -> None:
        ctx.response_headers.append(_BYPASS)
        self.metrics.cached(ctx.principal.tenant if ctx.principal is not None else "", "bypass")

    async def _lookup(self, key: str, note: dict[str, object]) -> Found | None:
        try:
            raw = await self.store.get(key)
        except CacheUnavailable:
            note["store"] = "unavailable"
            self.metrics.cache_errors += 1
            return None
        return self._known(key, raw)

    def _known(self, key: str, raw: bytes | None) -> Found | None:
        """The stored value as (value, its entry, tokens), decoded once while it stays hot."""
        if raw is None:
            return None
        known = self._decoded.get(key)
        if known is not None and known[0] is raw:
            return known
        entry = _stored(raw)
        if entry is None:
            return None
        found = (raw, entry, entry.tokens)
        if self._memo and len(raw) <= _MEMO_BYTES // 64:
            if known is not None:
                self._decoded_bytes -= len(known[0])
                del self._decoded[key]
            while self._decoded and (len(self._decoded) >= _MEMO_ENTRIES or
                                     self._decoded_bytes + len(raw) > _MEMO_BYTES):
                oldest = next(iter(self._decoded))
                self._decoded_bytes -= len(self._decoded.pop(oldest)[0])
            self._decoded[key] = found
            self._decoded_bytes += len(raw)
        return found

    async def on_complete(self, ctx: RequestContext, usage: Usage) -> None:
        capture = ctx.cache
        if not isinstance(capture, Capture) or ctx.status != 200 or ctx.reason is not None:
            return
        tenant = required(ctx.principal, "principal").tenant
        limit = capture.limit
        redact = _output_screen(ctx) if self.output_screens else None
        if capture.stream is not None:
            reported = {"prompt_tokens": usage.prompt_tokens or 0, "completion_tokens": usage.completion_tokens or 0}
            reported["total_tokens"] = reported["prompt_tokens"] + reported["completion_tokens"]
            entry = capture.stream.entry(reported, limit)
            if entry is None or any(c.finish_reason is None for c in entry.choices):
                return
            if redact is not None:    # kept as a whole answer, with what the model wrote masked
                value = b"B" + _LIMIT.pack(limit if limit is not None else -1) + redact(entry.body(ctx.request_id))
            else:
                value = b"E" + _encode_entry(entry)
        else:
            # A whole answer is kept as the backend's bytes and read when it serves a hit:
            # most entries are never hit, and a miss should cost little more than no cache.
            body = capture.body
            if body is None or body.find(b'"finish_reason":null') >= 0:
                return
            if redact is not None:
                body = redact(body)
            value = b"B" + _LIMIT.pack(limit if limit is not None else -1) + body
        if len(value) > self.cfg.max_entry_bytes:
            self.metrics.cached(tenant, "too_large")
            return
        if capture.semantic is not None and self.semantic is not None:
            shape, guard, vector = capture.semantic
            self.semantic.add(tenant, shape, guard, vector, capture.key)
        if self._put is not None:
            self._put(capture.key, value, capture.ttl)
            return
        task = asyncio.ensure_future(self._write(capture.key, value, capture.ttl))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _write(self, key: str, value: bytes, ttl: float) -> None:
        try:
            await self.store.set(key, value, ttl)
        except CacheUnavailable:
            self.metrics.cache_errors += 1

    async def purge(self, tenant: str) -> dict[str, int]:
        if self.semantic is not None:
            self.semantic.purge(tenant)
        return {"purged": await self.store.purge(tenant_prefix(self._prefix, tenant))}

    def _cost(self, model: str | None, entry: CacheEntry) -> float:
        prices = self._prices.get(model or "")
        if prices is None or not entry.usage:
            return 0.0
        return (prices[0] * entry.count("prompt_tokens") + prices[1] * entry.count("completion_tokens")) / 1e6

    async def close(self) -> None:
        if self._writes:
            await asyncio.wait(set(self._writes), timeout=2)
        if not self.keep_store:
            await self.store.close()
            if self.semantic is not None:
                self.semantic.close()


def _output_screen(ctx: RequestContext) -> Callable[[bytes], bytes] | None:
    """With ``pii.output: redact`` the entry is stored as it will be served: the personal
    data the model wrote masked, so none of it is kept in the cache (a fresh redactor: the
    request's own already counted what it masked)."""
    for transform in ctx.transforms or ():
        if isinstance(transform, OutputRedactor):
            return OutputRedactor(transform.find, {}).whole
    return None


def _secret(cfg: CacheConfig, shared: bool) -> bytes:
    raw = os.environ.get(cfg.key_env, "").strip()
    if not raw:
        if shared:
            raise ConfigError("cache.key_env", f"the redis cache needs {cfg.key_env} set: entries are sealed with it "
                                               "and every replica must share it")
        return os.urandom(32)
    import hashlib

    return hashlib.sha256(b"tokenward-cache\0" + raw.encode()).digest()


def _semantic(cfg: SemanticCacheConfig, secret: bytes) -> SemanticIndex:
    from ..cache import semantic

    try:
        return semantic.load(cfg, secret)
    except ImportError as exc:
        raise ConfigError("cache.semantic", f"the semantic cache needs the classifier extra "
                                            f"(pip install 'tokenward[classifier]'): {exc}") from None


def open_cache(config: Config) -> tuple[MemoryCache | RedisCache, bytes]:
    cfg = config.cache
    assert cfg is not None
    if cfg.store == "memory":
        return MemoryCache(cfg.max_entries, cfg.max_bytes), _secret(cfg, False)
    url = cfg.url or config.store.url
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise ConfigError("cache.url", "cache.store: redis needs a Redis URL (cache.url, or store.url)")
    secret = _secret(cfg, True)
    return RedisCache(url, cfg.timeout_ms / 1000, secret), secret


def build(config: Config, metrics: GatewayMetrics, closers: Closers,
          previous_cache: CacheStage | None) -> CacheStage | None:
    if config.cache is None:
        return None
    old = previous_cache
    if old is not None and old.cfg == config.cache and config.cache.store == "memory":
        store, secret = old.store, old.secret   # a reload keeps the process's cached answers
        old.keep_store = True
    else:
        store, secret = open_cache(config)
    prices = {name: (m.input_price_per_million, m.output_price_per_million) for name, m in config.models.items()}
    stage = CacheStage(config.cache, store, secret, config.store.key_prefix, prices, metrics)
    stage.output_screens = any(p.pii is not None and p.pii.output == "redact" for p in config.screening.policies.values())
    if config.cache.semantic is not None and any(p.cache_semantic for p in config.plans.values()):
        stage.semantic = old.semantic if old is not None and old.keep_store and old.semantic is not None \
            else _semantic(config.cache.semantic, secret)
    closers.add(stage.close)
    metrics.watch_cache(store)
    return stage
