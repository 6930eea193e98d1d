"""Is each backend there? A short, cached probe per upstream, for ``/readyz``.

``GET <base_url><health_path>`` (``/models`` by default: every OpenAI-compatible server
answers it, vLLM and llama.cpp without loading anything) through the upstream's own pool,
with its credential and a short timeout; a 2xx answer is healthy. A result is reused
for ``health_ttl_s``, and concurrent readiness checks share one probe in flight, so a
load balancer polling every replica often costs each backend one small request per TTL.

``/readyz`` is 503 while an upstream with ``ready_required: true`` (the default) is
unhealthy; an upstream with ``ready_required: false`` is probed and reported but never
takes the replica out of rotation; ``health_path: null`` turns its probe off.

The shared stores a request cannot do without are probed the same way (``add_store``):
the budget store (a Redis one; the memory store cannot fail) with one cheap read under a
bounded timeout, its result reused for ``STORE_TTL_S``. While one fails, ``/readyz`` is
503 and names it (``budget_store``): a replica that refuses every request with
``budget_store_unavailable`` is not ready.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Awaitable, Callable

from ..config.schema import Config
from .client import UpstreamError, UpstreamTimeout
from .response_head import Transport
from .targets import TargetTable, auth_headers

log = logging.getLogger("tokenward.upstream")


class _Probe:
    __slots__ = ("name", "pool", "path", "headers", "ttl", "timeout", "required", "healthy", "detail",
                 "checked", "inflight")

    def __init__(self, name: str, pool: Transport, path: str, headers: list[tuple[bytes, bytes]], ttl: float, timeout: float,
                 required: bool) -> None:
        self.name = name
        self.pool = pool
        self.path = path
        self.headers = headers
        self.ttl = ttl
        self.timeout = timeout
        self.required = required
        self.healthy = False
        self.detail = "not probed yet"
        self.checked = float("-inf")
        self.inflight: asyncio.Future[None] | None = None

    async def _run(self) -> None:
        try:
            resp = await self.pool.request("GET", self.path, self.headers, b"", timeout=self.timeout)
            try:
                await resp.read(timeout=self.timeout)
            finally:
                resp.abort()
            self.healthy = 200 <= resp.status < 300
            self.detail = "ok" if self.healthy else f"answered {resp.status}"
        except UpstreamError as exc:
            # /readyz is public: it says what kind of failure, the log says where and why
            detail = "timed out" if isinstance(exc, UpstreamTimeout) else "unreachable"
            if self.healthy or self.detail != detail:
                log.warning("upstream %s is %s: %s", self.name, detail, exc.detail)
            self.healthy, self.detail = False, detail
        self.checked = time.monotonic()

    async def check(self) -> None:
        if time.monotonic() - self.checked < self.ttl:
            return
        if self.inflight is None:
            self.inflight = asyncio.ensure_future(self._run())
            self.inflight.add_done_callback(self._clear)
        await asyncio.shield(self.inflight)

    def _clear(self, _: asyncio.Future[None]) -> None:
        self.inflight = None


# A store's probe result is reused this long; a probe waits at most STORE_TIMEOUT_S.
STORE_TTL_S = 1.0
STORE_TIMEOUT_S = 1.0


class _StoreProbe:
    """One shared store: ``ping`` is one cheap round trip; any exception is "unreachable"."""

    __slots__ = ("name", "ping", "timeout", "healthy", "detail", "checked", "inflight")

    def __init__(self, name: str, ping: Callable[[], Awaitable[object]], timeout: float) -> None:
        self.name = name
        self.ping = ping
        self.timeout = timeout
        self.healthy = False
        self.detail = "not probed yet"
        self.checked = float("-inf")
        self.inflight: asyncio.Future[None] | None = None

    async def _run(self) -> None:
        try:
            await asyncio.wait_for(self.ping(), self.timeout)
            self.healthy, self.detail = True, "ok"
        except asyncio.TimeoutError:
            self.healthy, self.detail = False, f"no answer within {self.timeout:g} s"
        except Exception:  # its own error (logged where it is used) may name an address: not said here
            self.healthy, self.detail = False, "unreachable"
        self.checked = time.monotonic()

    async def check(self) -> None:
        if time.monotonic() - self.checked < STORE_TTL_S:
            return
        if self.inflight is None:
            self.inflight = asyncio.ensure_future(self._run())
            self.inflight.add_done_callback(self._clear)
        await asyncio.shield(self.inflight)

    def _clear(self, _: asyncio.Future[None]) -> None:
        self.inflight = None


class UpstreamHealth:
    def __init__(self, config: Config, targets: TargetTable) -> None:
        self._stores: list[_StoreProbe] = []
        self._probes = [
            _Probe(name, targets.pools[name], up.health_path, [(b"accept", b"application/json")]
                   + auth_headers(name, up), up.health_ttl_s, up.health_timeout_s, up.ready_required)
            for name, up in config.upstreams.items() if up.health_path
        ]

    def add_store(self, name: str, ping: Callable[[], Awaitable[object]], timeout: float = STORE_TIMEOUT_S) -> None:
        """A store every request needs (``budget_store``...): /readyz is 503 while it fails."""
        self._stores.append(_StoreProbe(name, ping, timeout))

    async def report(self) -> tuple[bool, dict[str, dict[str, Any]]]:
        """(ready, per-upstream detail), probing the upstreams whose result is stale."""
        if self._probes:
            await asyncio.gather(*(probe.check() for probe in self._probes))
        now = time.monotonic()
        ready = all(probe.healthy for probe in self._probes if probe.required)
        detail = {probe.name: {"healthy": probe.healthy, "required": probe.required, "detail": probe.detail,
                               "age_s": round(now - probe.checked, 3)}
                  for probe in self._probes}
        return ready, detail

    async def stores(self) -> dict[str, dict[str, Any]]:
        """Per-store detail (probing the stale ones); empty when no store can fail."""
        if not self._stores:
            return {}
        await asyncio.gather(*(probe.check() for probe in self._stores))
        now = time.monotonic()
        return {probe.name: {"healthy": probe.healthy, "detail": probe.detail, "age_s": round(now - probe.checked, 3)}
                for probe in self._stores}
