"""``detector: http``: a prompt-injection classifier the operator runs as a service (a GPU box
with vLLM serving Prompt Guard, or anything speaking OpenAI's moderations API).

Why this shape:

* **One call for many requests.** Texts screened at about the same time wait up to
  ``batch_window_ms`` (or until ``max_batch`` are pending) and go out in one request: a GPU
  classifies 32 texts in about the time of one, and the service sees far fewer calls.
* **Verdicts cached** under HMAC-SHA256 of the tenant and the text (a per-process random
  key, or the value of ``TOKENWARD_CACHE_KEY`` when set), in a bounded LRU: a conversation
  resends its system prompt and history every turn, and those are read once. Per tenant
  (memos.py): another tenant's text is never answered from the cache, nor joins a question
  another tenant's request already asked; outside a request nothing is cached. Neither the
  text nor a plain hash of it is kept.
* **Long texts in windows** of ``max_chars`` (overlapping by an eighth), the score the
  maximum, so an instruction at the end of a long document is not cut off by the
  model's input limit.
* **The project's own HTTP client** (upstream/client.py: keep-alive pool, no task per
  request), no new dependency on the hot path. The policy's ``timeout_ms`` bounds the
  whole screen (stage s70, ``asyncio.wait_for``); a service that does not answer in time,
  answers an error status or a body of the wrong shape is a failure, and ``on_failure``
  decides (closed: 503 ``screening_unavailable``; open: admitted and recorded).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
from collections import OrderedDict
from typing import Any, Awaitable, Sequence

import msgspec

from .. import memos
from ..config.content import HttpDetector
from .screener import ScreenResult, Span

THRESHOLD = 0.5          # a text at or above this gets a span (label "http")


class BadAnswer(Exception):
    """The service answered, but not a verdict per text."""


class _Verdicts:
    """Bounded LRU: keyed hash of a text -> its score."""

    def __init__(self, entries: int, key: bytes) -> None:
        self._entries, self._key = entries, key
        self._scores: OrderedDict[bytes, float] = OrderedDict()

    def key(self, text: str) -> bytes | None:
        """The text's key for the running request's tenant; None outside a request."""
        tenant = memos.current()
        if tenant is None:
            return None
        mac = hmac.new(self._key, tenant.encode("utf-8", "surrogatepass"), hashlib.sha256)
        mac.update(b"\x00")   # no tenant name holds NUL: "ab" + "c" and "a" + "bc" differ
        mac.update(text.encode("utf-8", "surrogatepass"))
        return mac.digest()

    def get(self, key: bytes | None) -> float | None:
        if key is None:
            return None
        score = self._scores.get(key)
        if score is not None:
            self._scores.move_to_end(key)
        return score

    def put(self, key: bytes, score: float) -> None:
        if self._entries <= 0:
            return
        self._scores[key] = score
        self._scores.move_to_end(key)
        while len(self._scores) > self._entries:
            self._scores.popitem(last=False)


def windows(text: str, size: int) -> list[str]:
    """``text`` in pieces of at most ``size`` characters, overlapping by an eighth."""
    if len(text) <= size:
        return [text]
    step = size - size // 8
    return [text[i:i + size] for i in range(0, len(text) - size // 8, step)]


class RemoteInjection:
    """A ``Screener`` whose model runs elsewhere; ``calls`` and ``cache_hits`` count what it did."""

    name = "http"

    def __init__(self, cfg: HttpDetector, pool: Any = None) -> None:
        from urllib.parse import urlsplit

        from ..upstream.client import UpstreamPool

        url = urlsplit(cfg.url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"http.url must be http(s)://host[:port]/path, got {cfg.url!r}")
        self.cfg = cfg
        self._path = url.path or "/"
        origin = f"{url.scheme}://{url.netloc}"
        self._pool = pool or UpstreamPool(origin, max_connections=cfg.connections, connect_timeout=2.0,
                                          read_timeout=30.0, pool_timeout=2.0)
        self._headers = [(b"content-type", b"application/json"), (b"accept", b"application/json")]
        if cfg.api_key_env:
            secret = os.environ.get(cfg.api_key_env)
            if not secret:
                raise ValueError(f"http.api_key_env: {cfg.api_key_env} is not set")
            self._headers.append((b"authorization", b"Bearer " + secret.encode()))
        key = os.environ.get("TOKENWARD_CACHE_KEY", "").encode() or os.urandom(32)
        self._verdicts = _Verdicts(cfg.cache_entries, key)
        # (text, its key, the question): a key is one tenant's, so tenants never share a question
        self._pending: list[tuple[str, bytes | None, asyncio.Future[float]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._calls: set[asyncio.Task[None]] = set()           # in flight (a task nobody holds may be collected)
        self.calls = self.cache_hits = 0

    def screen(self, texts: Sequence[str]) -> Awaitable[ScreenResult]:
        return self._screen(list(texts))

    async def _screen(self, texts: list[str]) -> ScreenResult:
        loop = asyncio.get_running_loop()
        per_text: list[list[Any]] = []
        for text in texts:
            parts: list[Any] = []
            for piece in (windows(text, self.cfg.max_chars) if text.strip() else ()):
                key = self._verdicts.key(piece)
                score = self._verdicts.get(key)
                if score is None:
                    parts.append(self._ask(loop, piece, key))
                else:
                    self.cache_hits += 1
                    parts.append(score)
            per_text.append(parts)
        waiting = [p for parts in per_text for p in parts if isinstance(p, asyncio.Future)]
        if waiting:    # shielded: a request that gives up must not cancel a verdict another one shares
            await asyncio.gather(*map(asyncio.shield, waiting))
        scores = [max((p.result() if isinstance(p, asyncio.Future) else p for p in parts), default=0.0)
                  for parts in per_text]
        spans = [Span(i, 0, len(text), self.name) for i, (text, s) in enumerate(zip(texts, scores)) if s >= THRESHOLD]
        return ScreenResult(round(max(scores, default=0.0), 4), spans)

    def _ask(self, loop: asyncio.AbstractEventLoop, text: str, key: bytes | None) -> asyncio.Future[float]:
        if key is not None:
            for _, queued, asked in self._pending:        # the same text twice in one window: one question
                if queued == key and not asked.done():
                    return asked
        fut: asyncio.Future[float] = loop.create_future()

        def keep(f: asyncio.Future[float]) -> None:
            if key is not None and not f.cancelled() and f.exception() is None:
                self._verdicts.put(key, f.result())

        fut.add_done_callback(keep)
        self._pending.append((text, key, fut))
        if len(self._pending) >= self.cfg.max_batch:
            self._flush()
        elif self._timer is None:
            self._timer = loop.call_later(self.cfg.batch_window_ms / 1000, self._flush)
        return fut

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending = self._pending[:self.cfg.max_batch], self._pending[self.cfg.max_batch:]
        if self._pending:
            self._timer = asyncio.get_running_loop().call_later(0, self._flush)
        if batch:
            task = asyncio.get_running_loop().create_task(self._call(batch))
            self._calls.add(task)
            task.add_done_callback(self._calls.discard)

    async def _call(self, batch: list[tuple[str, bytes | None, asyncio.Future[float]]]) -> None:
        self.calls += 1
        try:
            scores = await self._classify([text for text, _, _ in batch])
        except Exception as exc:                          # every waiter fails; on_failure decides
            for _, _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc if isinstance(exc, (BadAnswer, OSError)) else BadAnswer(type(exc).__name__))
            return
        for (_, _, fut), score in zip(batch, scores):
            if not fut.done():
                fut.set_result(score)

    async def _classify(self, texts: list[str]) -> list[float]:
        body = msgspec.json.encode({"model": self.cfg.model, "input": texts})
        response = await self._pool.request("POST", self._path, self._headers, body)
        raw = await response.read(limit=8 * 1024 * 1024)
        if response.status != 200:
            raise BadAnswer(f"status {response.status}")
        try:
            answer = msgspec.json.decode(raw)
            scores = (_classify_scores(answer, self.cfg.label_index) if self.cfg.api == "classify"
                      else _moderation_scores(answer, self.cfg.categories))
        except (msgspec.DecodeError, KeyError, IndexError, TypeError, ValueError) as exc:
            raise BadAnswer(f"unexpected answer: {type(exc).__name__}") from None
        if len(scores) != len(texts):
            raise BadAnswer(f"{len(scores)} verdicts for {len(texts)} texts")
        return scores

    async def aclose(self) -> None:
        await self._pool.aclose()


def _classify_scores(answer: dict[str, Any], label_index: int) -> list[float]:
    rows = sorted(answer["data"], key=lambda row: row.get("index", 0))
    return [_unit(row["probs"][label_index]) for row in rows]


def _moderation_scores(answer: dict[str, Any], categories: tuple[str, ...] | None) -> list[float]:
    out = []
    for result in answer["results"]:
        scores = result.get("category_scores") or {}
        picked = [float(v) for k, v in scores.items() if categories is None or k in categories]
        out.append(_unit(max(picked)) if picked else (1.0 if result.get("flagged") else 0.0))
    return out


def _unit(value: Any) -> float:
    score = float(value)
    if not 0.0 <= score <= 1.0:
        raise ValueError("a score outside [0, 1]")
    return score


__all__ = ["BadAnswer", "RemoteInjection", "windows"]
