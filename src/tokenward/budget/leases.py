"""Keeping this process's reservations alive, and finishing settles the store missed.

One background task per process (not per request) wakes every ``lease_s / 3``:

- renews the lease of every reservation this process still holds (one pipelined write per
  store), so a stream that runs for an hour keeps its reservation;
- retries settles that failed while the store was unreachable (each is idempotent by
  reservation id, so a retry that races a late success is harmless); one that outlives
  its lease is left to the reconciler, which charges it in full;
- drops, once a minute, budget values idle long enough to be full again (reconcile.py);
- runs the reconciler for leases that expired anywhere (a dead replica's), but only once
  the store has answered this process for a whole lease: after an outage longer than a
  lease, every lease has expired, the living replicas' too, and each owner needs a tick to
  renew its own before anyone may take a lease's expiry as proof that its owner died. The
  same wait applies after start-up.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from typing import Any, Awaitable, Callable, TypeVar

from .guard import Breaker, StoreHealth
from .reconcile import Reconciler
from .store import BudgetStore, ImmediateStore, Layout, LeaseRenewal, SettleCall, StoreUnavailable

log = logging.getLogger("tokenward.budget")
T = TypeVar("T")


class Ticket:
    """A reservation this process holds: where, and how to settle it exactly once."""

    __slots__ = ("reservation_id", "store", "parts", "settled")

    def __init__(self, reservation_id: str, store: BudgetStore, parts: tuple[tuple[Layout, str], ...]) -> None:
        self.reservation_id = reservation_id
        self.store = store
        self.parts = parts          # ((layout, record_key), ...) per namespace reserved in
        self.settled = False


class Guarded:
    """A store and its breaker (None for a store that cannot fail: the memory store)."""

    __slots__ = ("store", "breaker", "now", "health")

    def __init__(self, store: BudgetStore, breaker: Breaker | None) -> None:
        self.store = store
        self.breaker = breaker
        self.health = StoreHealth()   # every call's outcome (the breaker opens only after several)
        # A store that answers without awaiting (the memory store) is called directly: the
        # same atomic step, without a coroutine per call on the hot path.
        self.now = store if breaker is None and isinstance(store, ImmediateStore) else None

    def allow(self) -> bool:
        return self.breaker is None or self.breaker.allow()

    async def call(self, method: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Call a store method (after ``allow()``), telling the breaker how it went."""
        if self.breaker is None:
            return await method(*args)
        try:
            result = await method(*args)
        except StoreUnavailable as exc:
            self.failed(exc)
            raise
        except BaseException:
            self.abandoned()
            raise
        self.succeeded()
        return result

    # What ``call`` tells the breaker, for a hot path that awaits the store itself.
    def succeeded(self) -> None:
        if self.breaker is not None:
            self.breaker.success()
            if not self.health.up:
                self.health.answered()

    def failed(self, exc: StoreUnavailable) -> None:
        self.health.failed(exc)
        if self.breaker is not None:
            if getattr(exc, "node_local", False):
                self.breaker.abandon()   # one cluster node: it has a breaker of its own
            else:
                self.breaker.failure()

    def abandoned(self) -> None:
        if self.breaker is not None:
            self.breaker.abandon()   # a cancelled probe must not hold the breaker open forever


class LeaseKeeper:
    MAX_PENDING = 10_000

    def __init__(self, lease_s: float, clock: Callable[[], float], reconcilers: list[tuple[Guarded, Reconciler]]) -> None:
        self.lease_ms = int(lease_s * 1000)
        self.interval_s = max(lease_s / 3, 0.01)
        self._clock = clock
        self._reconcilers = reconcilers
        self.grace_s = lease_s
        # per reconciler: since when its store has answered without a failure (None: not yet)
        self._answering_since: list[float | None] = [None] * len(reconcilers)
        self.open: dict[str, Ticket] = {}
        self.pending: list[tuple[Guarded, SettleCall]] = []
        self.retrying = 0   # settles taken from ``pending`` and not yet answered
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    def start(self) -> None:
        """Start the background task (needs a running loop); every replica runs it from start-up,
        so one that holds nothing still reconciles the leases of one that died."""
        if self._task is None and not self._closing:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="tokenward-leases")

    def hold(self, ticket: Ticket) -> None:
        self.open[ticket.reservation_id] = ticket
        if self._task is None:
            self.start()

    def release(self, ticket: Ticket) -> None:
        self.open.pop(ticket.reservation_id, None)

    def retry_later(self, guarded: Guarded, calls: list[SettleCall]) -> None:
        self.pending.extend((guarded, call) for call in calls)
        if len(self.pending) > self.MAX_PENDING:
            # The oldest are past their lease by now: the reconciler settles those in full.
            del self.pending[: len(self.pending) - self.MAX_PENDING]

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:  # the keeper must outlive any one bad tick
                log.exception("lease keeper tick failed")

    async def tick(self) -> None:
        await self._renew()
        await self._retry_pending()
        for i, (guarded, reconciler) in enumerate(self._reconcilers):
            since = self._answering_since[i]
            if not guarded.allow():
                self._answering_since[i] = None
                continue
            now = self._clock()
            try:
                await guarded.call(reconciler.run_once, since is not None and now - since >= self.grace_s)
                await guarded.call(reconciler.sweep_if_due)
            except StoreUnavailable:
                self._answering_since[i] = None
            else:
                if since is None:
                    self._answering_since[i] = now

    async def _renew(self) -> None:
        until = int(self._clock() * 1000) + self.lease_ms
        by_store: dict[int, tuple[BudgetStore, dict[str, list[str]]]] = {}
        for ticket in self.open.values():
            _, groups = by_store.setdefault(id(ticket.store), (ticket.store, defaultdict(list)))
            for layout, _record in ticket.parts:
                groups[layout.leases_key].append(ticket.reservation_id)
        for store, groups in by_store.values():
            try:
                await store.renew([LeaseRenewal(key, until, ids) for key, ids in groups.items()])
            except StoreUnavailable:
                pass  # the lease runs on; the next tick tries again

    async def _retry_pending(self) -> None:
        pending, self.pending = self.pending, []
        now_ms = int(self._clock() * 1000)
        self.retrying = len(pending)   # each counts until it is answered or put back
        try:
            for guarded, call in pending:
                try:
                    if not guarded.allow():
                        self.pending.append((guarded, call))
                    else:
                        await guarded.call(guarded.store.settle, [call._replace(now_ms=now_ms)])
                except StoreUnavailable:
                    self.pending.append((guarded, call))
                finally:
                    self.retrying -= 1
        finally:
            self.retrying = 0

    async def close(self) -> None:
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

