"""Is each backend there? A short, cached probe per target, for ``/readyz`` and the pools.

``GET <url><health_path>`` (``/models`` by default: every OpenAI-compatible server answers
it, vLLM and llama.cpp without loading anything) through the target's own connections, with
the upstream's credential and a short timeout; a 2xx answer is healthy. A result is reused
for ``health_ttl_s``, and concurrent readiness checks share one probe in flight, so a load
balancer polling every replica often costs each backend one small request per TTL.

A pool of several targets is also probed in the background, every ``health_interval_s``:
each outcome goes to the pool (upstream/pool.py ``probed``), where failures in a row eject a
target and a passing probe readmits an ejected one at once. A pool of one is probed only
when ``/readyz`` asks, as a single upstream always was.

``/readyz`` is 503 while an upstream with ``ready_required: true`` (the default) has no
healthy target (admitted, its last probe passed); an upstream with ``ready_required: false``
is probed and reported but never takes the replica out of rotation; ``health_path: null``
turns its probes off. The answer counts a pool's targets and healthy ones; it never names
them (it is public: their addresses are in the log, ``/metrics`` and the status page).

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

from ..config.schema import Config, UpstreamConfig
from .client import UpstreamError, UpstreamTimeout
from .pool import BackendPool, Replica
from .targets import TargetTable, auth_headers

log = logging.getLogger("tokenward.upstream")


class _Probe:
    """One target's probe: ``GET <url><health_path>`` through the target's own connections.
    Its outcome goes to the pool (``BackendPool.probed``): a failure counts toward the
    target's ejection, a success readmits it."""

    __slots__ = ("name", "pool", "replica", "path", "headers", "ttl", "timeout", "checked", "inflight")

    def __init__(self, name: str, pool: BackendPool, replica: Replica, path: str,
                 headers: list[tuple[bytes, bytes]], ttl: float, timeout: float) -> None:
        self.name = name
        self.pool = pool
        self.replica = replica
        self.path = path
        self.headers = headers
        self.ttl = ttl
        self.timeout = timeout
        self.checked = float("-inf")
        self.inflight: asyncio.Future[None] | None = None

    async def _run(self) -> None:
        replica = self.replica
        started = self.pool.now()
        try:
            resp = await replica.transport.request("GET", self.path, self.headers, b"", timeout=self.timeout)
            try:
                await resp.read(timeout=self.timeout)
            finally:
                resp.abort()
            healthy = 200 <= resp.status < 300
            detail = "ok" if healthy else f"answered {resp.status}"
        except UpstreamError as exc:
            # /readyz is public: it says what kind of failure, the log says where and why
            healthy, detail = False, "timed out" if isinstance(exc, UpstreamTimeout) else "unreachable"
            if replica.probe_ok is not False or replica.probe_detail != detail:
                log.warning("upstream %s (target %s) is %s: %s", self.name, replica.label, detail, exc.detail)
        self.pool.probed(replica, healthy, started, detail)
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


class _PoolProbes:
    """An upstream's probes, one per target, and whether it is ready: some target admitted
    whose probe passes."""

    __slots__ = ("name", "pool", "probes", "required", "interval")

    def __init__(self, name: str, pool: BackendPool, up: UpstreamConfig, headers: list[tuple[bytes, bytes]]) -> None:
        self.name = name
        self.pool = pool
        self.required = up.ready_required
        path = up.health_path or ""
        # a pool of several is probed in the background (readmission, routing); a pool of one
        # only when /readyz asks, as a single upstream always was
        self.interval = up.health_interval_s if pool.several and path else None
        ttl = min(up.health_ttl_s, up.health_interval_s) if self.interval else up.health_ttl_s
        self.probes = [_Probe(name, pool, replica, path, headers, ttl, up.health_timeout_s)
                       for replica in pool.replicas] if path else []

    def report(self, now: float) -> dict[str, Any]:
        pool = self.pool
        healthy = [r for r in pool.replicas if pool.healthy(r)]
        entry: dict[str, Any] = {"healthy": bool(healthy), "required": self.required}
        if healthy:
            entry["detail"] = "ok"
        else:
            failing = pool.replicas[0]
            entry["detail"] = failing.probe_detail if failing.probe_ok is False else "ejected"
        checked = max((probe.checked for probe in self.probes), default=float("-inf"))
        entry["age_s"] = round(now - checked, 3) if checked > float("-inf") else None
        if pool.several:   # counts only: /readyz is public, the targets' addresses are not
            entry["targets"] = len(pool.replicas)
            entry["targets_healthy"] = len(healthy)
        return entry

    async def run(self) -> None:
        """Probe every target each ``interval``, for as long as the gateway runs."""
        assert self.interval is not None
        while True:
            outcomes = await asyncio.gather(*(probe.check() for probe in self.probes), return_exceptions=True)
            for probe, outcome in zip(self.probes, outcomes):
                if isinstance(outcome, Exception):   # not a backend's failure: the gateway's own
                    log.error("upstream %s: the probe of target %s failed inside the gateway: %r",
                              self.name, probe.replica.label, outcome)
            await asyncio.sleep(self.interval)


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
        self._pools = [
            _PoolProbes(name, targets.pools[name], up, [(b"accept", b"application/json")] + auth_headers(name, up))
            for name, up in config.upstreams.items()
        ]
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        """Probe the pools of several targets in the background (call in the running loop)."""
        for pool in self._pools:
            if pool.interval is not None and pool.probes:
                pool.pool.probe_every_s = pool.interval
                self._tasks.append(asyncio.get_running_loop().create_task(pool.run()))

    async def aclose(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def add_store(self, name: str, ping: Callable[[], Awaitable[object]], timeout: float = STORE_TIMEOUT_S) -> None:
        """A store every request needs (``budget_store``...): /readyz is 503 while it fails."""
        self._stores.append(_StoreProbe(name, ping, timeout))

    async def report(self) -> tuple[bool, dict[str, dict[str, Any]]]:
        """(ready, per-upstream detail), probing the targets whose result is stale. Ready
        while every required upstream has a healthy target (admitted, its probe passing)."""
        probes = [probe for pool in self._pools for probe in pool.probes]
        if probes:
            await asyncio.gather(*(probe.check() for probe in probes))
        now = time.monotonic()
        detail = {pool.name: pool.report(now) for pool in self._pools if pool.probes}
        ready = all(entry["healthy"] for entry in detail.values() if entry["required"])
        return ready, detail

    async def stores(self) -> dict[str, dict[str, Any]]:
        """Per-store detail (probing the stale ones); empty when no store can fail."""
        if not self._stores:
            return {}
        await asyncio.gather(*(probe.check() for probe in self._stores))
        now = time.monotonic()
        return {probe.name: {"healthy": probe.healthy, "detail": probe.detail, "age_s": round(now - probe.checked, 3)}
                for probe in self._stores}
