"""Is each backend there? A short, cached probe per upstream, for ``/readyz``.

``GET <base_url><health_path>`` (``/models`` by default: every OpenAI-compatible server
answers it, vLLM and llama.cpp without loading anything) through the upstream's own pool,
with its credential and a short timeout; a 2xx answer is healthy. A result is reused
for ``health_ttl_s``, and concurrent readiness checks share one probe in flight, so a
load balancer polling every replica often costs each backend one small request per TTL.

``/readyz`` is 503 while an upstream with ``ready_required: true`` (the default) is
unhealthy; an upstream with ``ready_required: false`` is probed and reported but never
takes the replica out of rotation; ``health_path: null`` turns its probe off.
"""

from __future__ import annotations

import asyncio
import time

from ..config.schema import Config
from .client import UpstreamError, UpstreamPool
from .targets import TargetTable, auth_headers


class _Probe:
    __slots__ = ("name", "pool", "path", "headers", "ttl", "timeout", "required", "healthy", "detail",
                 "checked", "inflight")

    def __init__(self, name: str, pool: UpstreamPool, path: str, headers: list, ttl: float, timeout: float,
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
        self.inflight: asyncio.Future | None = None

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
            self.healthy, self.detail = False, exc.detail
        self.checked = time.monotonic()

    async def check(self) -> None:
        if time.monotonic() - self.checked < self.ttl:
            return
        if self.inflight is None:
            self.inflight = asyncio.ensure_future(self._run())
            self.inflight.add_done_callback(self._clear)
        await asyncio.shield(self.inflight)

    def _clear(self, _: asyncio.Future) -> None:
        self.inflight = None


class UpstreamHealth:
    def __init__(self, config: Config, targets: TargetTable) -> None:
        self._probes = [
            _Probe(name, targets.pools[name], up.health_path, [(b"accept", b"application/json")]
                   + auth_headers(name, up), up.health_ttl_s, up.health_timeout_s, up.ready_required)
            for name, up in config.upstreams.items() if up.health_path
        ]

    async def report(self) -> tuple[bool, dict[str, dict]]:
        """(ready, per-upstream detail), probing the upstreams whose result is stale."""
        if self._probes:
            await asyncio.gather(*(probe.check() for probe in self._probes))
        now = time.monotonic()
        ready = all(probe.healthy for probe in self._probes if probe.required)
        detail = {probe.name: {"healthy": probe.healthy, "required": probe.required, "detail": probe.detail,
                               "age_s": round(now - probe.checked, 3)}
                  for probe in self._probes}
        return ready, detail
