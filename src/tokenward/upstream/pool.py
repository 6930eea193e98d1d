"""An upstream's targets, what this process has in flight on each, and their health.

``BackendPool`` is one upstream: a ``base_url`` is a pool of one, ``targets`` a pool of
several (docs/upstreams.md, "Pools"). The forward step takes a target for a request with
``take`` (routing.py picks it), holds it until the answer has ended, and gives it back with
``release``; the request's reservation (``ctx.work.reserve_tokens``) counts on that target
meanwhile. Everything here is one process's: with N workers each routes on what it admitted.

Caps (``max_inflight_requests``, ``max_inflight_tokens`` per target): a target at its cap
takes nothing more. When every target is, ``wait_turn`` queues the request for at most
``queue_timeout_ms`` (FIFO, at most as many waiting as the targets run at once), or refuses
it at once with ``upstream_saturated`` and a ``Retry-After`` from what the pool sees: how
long a request holds a target, over how many are in flight. A request alone on an idle
target is let through whatever its size, or it could never be served.

Health, as Envoy's outlier detection: ``eject_after`` failures in a row (connect failure,
5xx, timeout: ``failed``) eject a target for ``eject_base_s``, doubling with each ejection
up to ``eject_max_s`` (the doubling starts over once a target has served well for
``eject_max_s``). Probes (upstream/health.py) count their failures the same way, separately,
and a good probe sent after the ejection readmits the target at once; while the pool is
probed in the background, a failing probe keeps an ejected target out past its back-off.
When every target is ejected, all of them take requests again (Envoy's panic mode): a pool
of one then behaves as the single upstream always did.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import math
import time
from typing import Any, Callable, Iterator

from ..config.schema import UpstreamConfig
from ..errors import Reason, Refusal
from . import routing
from .affinity import AffinityTable
from .pool_status import PoolStatus, TargetStatus
from .response_head import Transport

log = logging.getLogger("tokenward.upstream")

_TIMED_OUT = object()
_HOLD_WEIGHT = 0.05        # the moving average of how long a request holds a target


class Replica:
    """One target of a pool: its address and connections, its caps, what is in flight."""

    __slots__ = ("label", "url", "transport", "weight", "max_requests", "max_tokens", "requests", "tokens",
                 "turn", "failures", "probe_failures", "ejected_until", "ejected_at", "ejections",
                 "readmitted_at", "probe_ok", "probe_detail", "probed_at", "sent", "failed_total", "last_failure")

    def __init__(self, label: str, url: str, transport: Transport, weight: int = 1, max_requests: int | None = None,
                 max_tokens: int | None = None) -> None:
        self.label = label            # host:port, as the config writes it (metrics, decision records)
        self.url = url
        self.transport = transport    # an UpstreamPool, or an in-process one (upstream/memory.py)
        self.weight = weight
        self.max_requests = max_requests
        self.max_tokens = max_tokens
        self.requests = 0             # in flight from this process
        self.tokens = 0               # their reservations
        self.turn = 0                 # smooth weighted round robin (routing.rotate)
        self.failures = 0             # requests failed in a row
        self.probe_failures = 0
        self.ejected_until = 0.0      # monotonic; admitted once past it
        self.ejected_at = -math.inf
        self.ejections = 0
        self.readmitted_at = -math.inf
        self.probe_ok: bool | None = None
        self.probe_detail = "not probed yet"
        self.probed_at = -math.inf
        self.sent = 0
        self.failed_total = 0
        self.last_failure = ""        # what kind ("unreachable", "answered 503"...): no address

    def admitted(self, now: float) -> bool:
        return now >= self.ejected_until

    def room(self, tokens: int) -> bool:
        if self.max_requests is not None and self.requests >= self.max_requests:
            return False
        return self.max_tokens is None or not self.requests or self.tokens + tokens <= self.max_tokens


class _Waiter:
    __slots__ = ("future", "tokens", "chain")

    def __init__(self, future: asyncio.Future[Any], tokens: int, chain: list[int] | None) -> None:
        self.future = future
        self.tokens = tokens
        self.chain = chain


class BackendPool:
    def __init__(self, name: str, up: UpstreamConfig, replicas: list[Replica],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.replicas = replicas
        self.single = replicas[0] if len(replicas) == 1 else None
        self.several = len(replicas) > 1
        self.routing = up.routing
        self.max_attempts = up.max_attempts
        self.retry_on_timeout = up.retry_on_timeout
        self.eject_after = up.eject_after
        self.eject_base_s = up.eject_base_s
        self.eject_max_s = up.eject_max_s
        self.slack = up.affinity_slack
        self.queue_timeout_s = up.queue_timeout_ms / 1000
        self.capped = any(r.max_requests is not None or r.max_tokens is not None for r in replicas)
        slots = [r.max_requests for r in replicas]
        self.queue_limit = sum(s for s in slots if s is not None) + 256 * sum(1 for s in slots if s is None)
        self.affinity: AffinityTable[Replica] | None = (
            AffinityTable() if up.routing == "prefix_affinity" and self.several else None)
        self.last_affinity: str | None = None   # what the latest take did with a prefix
        self.probe_every_s: float | None = None   # set by upstream/health.py when it probes in the background
        self.hold_s = 1.0
        self.saturated = 0
        self.failovers = 0
        self._waiting: collections.deque[_Waiter] = collections.deque()
        self._clock = clock

    def now(self) -> float:
        """This pool's clock (monotonic seconds): what probes are timed on."""
        return self._clock()

    # -- taking and giving back --------------------------------------------------------------

    def take(self, tokens: int, tried: list[Replica] | None = None, chain: list[int] | None = None) -> Replica | None:
        """The target for a request reserving ``tokens``, counted on it; None when every target
        not in ``tried`` is at its cap. ``chain``: the prompt's prefixes (prefix_affinity)."""
        single = self.single
        if single is not None and not tried:
            if self.capped and not single.room(tokens):
                return None
            single.requests += 1
            single.tokens += tokens
            return single
        replica = self._pick(tokens, tried, chain)
        if replica is not None:
            replica.requests += 1
            replica.tokens += tokens
        return replica

    def _pick(self, tokens: int, tried: list[Replica] | None, chain: list[int] | None) -> Replica | None:
        now = self._clock()
        left = [r for r in self.replicas if r not in tried] if tried else self.replicas
        admitted = [r for r in left if now >= r.ejected_until] or left   # every one ejected: panic
        if self.capped:
            admitted = [r for r in admitted if r.room(tokens)]
        if not admitted:
            return None
        table = self.affinity
        self.last_affinity = None
        if table is not None and chain:
            holder = table.holder(chain)
            chosen, kept = routing.affine(admitted, holder, self.slack)
            if holder is None:
                table.fresh += 1
                self.last_affinity = "new"
            elif kept:
                table.hits += 1
                self.last_affinity = "hit"
            else:
                table.moved += 1
                self.last_affinity = "moved"
            table.record(chain, chosen)
            return chosen
        if self.routing == "least_requests":
            return routing.least_requests(admitted)
        if self.routing == "round_robin":
            return routing.rotate(admitted)
        return routing.least_reserved(admitted)

    def release(self, replica: Replica, tokens: int, taken_ns: int = 0, now_ns: int = 0) -> None:
        """The request is over on ``replica``: its reservation stops counting there."""
        replica.requests -= 1
        replica.tokens -= tokens
        if self.capped:
            if now_ns > taken_ns:
                self.hold_s += ((now_ns - taken_ns) / 1e9 - self.hold_s) * _HOLD_WEIGHT
            if self._waiting:
                self._wake()

    def swap(self, replica: Replica, tokens: int, tried: list[Replica]) -> Replica | None:
        """Failover: another target not yet tried takes the request's reservation over from
        ``replica`` (None: none left with room; ``replica`` keeps it)."""
        other = self.take(tokens, tried)
        if other is not None:
            replica.requests -= 1
            replica.tokens -= tokens
            self.failovers += 1
            if self.capped and self._waiting:
                self._wake()
        return other

    async def wait_turn(self, tokens: int, chain: list[int] | None = None) -> Replica:
        """Every target is at its cap: wait up to ``queue_timeout_ms`` for one, in turn, or
        raise ``upstream_saturated``."""
        if self.queue_timeout_s <= 0 or len(self._waiting) >= self.queue_limit:
            raise self._refusal()
        loop = asyncio.get_running_loop()
        waiter = _Waiter(loop.create_future(), tokens, chain)
        self._waiting.append(waiter)
        timer = loop.call_later(self.queue_timeout_s, _expire, waiter.future)
        try:
            got = await waiter.future
        except asyncio.CancelledError:
            future = waiter.future
            if future.done() and not future.cancelled() and isinstance(future.result(), Replica):
                self.release(future.result(), tokens)
            raise
        finally:
            timer.cancel()
            try:
                self._waiting.remove(waiter)
            except ValueError:
                pass
        if got is _TIMED_OUT:
            raise self._refusal()
        replica: Replica = got
        return replica

    def _wake(self) -> None:
        waiting = self._waiting
        while waiting:
            waiter = waiting[0]
            if waiter.future.done():
                waiting.popleft()
                continue
            replica = self.take(waiter.tokens, None, waiter.chain)
            if replica is None:
                return
            waiting.popleft()
            waiter.future.set_result(replica)

    def _refusal(self) -> Refusal:
        self.saturated += 1
        in_flight = sum(r.requests for r in self.replicas)
        # when a place should free up for this request: one request's hold on a target,
        # over the requests in flight (one of them ends that often), times those ahead of it
        seconds = max(1, math.ceil(self.hold_s * (len(self._waiting) + 1) / max(in_flight, 1)))
        return Refusal(Reason.upstream_saturated,
                       f"every backend of this model is at its capacity; retry in {seconds} s",
                       headers=((b"retry-after", b"%d" % seconds),))

    # -- health ------------------------------------------------------------------------------

    def succeeded(self, replica: Replica) -> None:
        """A target answered (any status below 500)."""
        replica.failures = 0
        if replica.ejections and self._clock() - replica.readmitted_at >= self.eject_max_s:
            replica.ejections = 0

    def failed(self, replica: Replica, kind: str) -> None:
        """A request failed on ``replica`` for a reason that is the target's: ``kind`` says
        what ("unreachable", "timed out", "answered 503"), never where."""
        replica.failures += 1
        replica.failed_total += 1
        replica.last_failure = kind
        now = self._clock()
        if replica.failures >= self.eject_after and replica.admitted(now):
            self._eject(replica, now, f"{replica.failures} requests failed in a row ({kind})")

    def probed(self, replica: Replica, ok: bool, started: float, detail: str) -> None:
        """A probe sent at ``started`` (this pool's clock) came back."""
        now = self._clock()
        replica.probe_ok, replica.probe_detail, replica.probed_at = ok, detail, now
        if ok:
            replica.probe_failures = 0
            if not replica.admitted(now) and started >= replica.ejected_at:
                self._readmit(replica, now)
            return
        replica.probe_failures += 1
        if replica.admitted(now):
            if replica.probe_failures >= self.eject_after:
                self._eject(replica, now, f"{replica.probe_failures} probes failed in a row ({detail})")
        elif self.probe_every_s is not None:
            # out until a probe passes, however short its back-off
            replica.ejected_until = max(replica.ejected_until, now + 2 * self.probe_every_s)

    def _eject(self, replica: Replica, now: float, why: str) -> None:
        back_off = min(self.eject_base_s * 2 ** min(replica.ejections, 30), self.eject_max_s)
        replica.ejections += 1
        replica.ejected_at = now
        replica.ejected_until = now + back_off
        replica.failures = 0
        log.warning("upstream %s: target %s ejected for %g s: %s", self.name, replica.label, back_off, why)

    def _readmit(self, replica: Replica, now: float) -> None:
        replica.ejected_until = 0.0
        replica.readmitted_at = now
        replica.failures = 0
        log.warning("upstream %s: target %s readmitted: its probe passed", self.name, replica.label)
        if self.capped and self._waiting:
            self._wake()

    def healthy(self, replica: Replica) -> bool:
        """Admitted, and its last probe (if any) passed: what /readyz counts."""
        return replica.admitted(self._clock()) and replica.probe_ok is not False

    # -- what is shown ---------------------------------------------------------------------

    def states(self) -> Iterator[tuple[str, bool, int]]:
        """(target, admitted, reserved tokens in flight) per target: the two gauges."""
        now = self._clock()
        for replica in self.replicas:
            yield replica.label, replica.admitted(now), replica.tokens

    def snapshot(self) -> PoolStatus:
        """The status page's rows (control/status.py): the targets and their state here."""
        now = self._clock()
        rows: list[TargetStatus] = []
        for r in self.replicas:
            rows.append({"target": r.label, "up": r.admitted(now), "weight": r.weight,
                         "inflight_requests": r.requests, "inflight_tokens": r.tokens,
                         "max_inflight_requests": r.max_requests, "max_inflight_tokens": r.max_tokens,
                         "ejected_for_s": round(max(0.0, r.ejected_until - now), 1), "ejections": r.ejections,
                         "failures_in_a_row": r.failures, "failed": r.failed_total, "last_failure": r.last_failure,
                         "probe": r.probe_detail, "sent": r.sent})
        out: PoolStatus = {"routing": self.routing, "targets": rows, "saturated": self.saturated,
                           "failovers": self.failovers, "waiting": len(self._waiting)}
        table = self.affinity
        if table is not None:
            known = table.hits + table.moved
            out["affinity"] = {"hits": table.hits, "moved": table.moved, "new": table.fresh,
                               "hit_rate": round(table.hits / known, 3) if known else None}
        return out

    @property
    def stats(self) -> dict[str, int]:
        """The targets' connections, summed (the client's ``stats``)."""
        total = {"open": 0, "idle": 0, "waiting": 0}
        for replica in self.replicas:
            for key, value in replica.transport.stats.items():
                total[key] = total.get(key, 0) + value
        return total

    async def aclose(self) -> None:
        for replica in self.replicas:
            await replica.transport.aclose()


def _expire(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.set_result(_TIMED_OUT)
