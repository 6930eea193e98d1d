"""The lease reconciler: settle, charged in full, every reservation whose lease expired.

A reservation's lease is renewed while its request is alive (``leases.LeaseKeeper``). If
the replica holding it dies, nobody renews it; once it expires, any replica's reconciler
settles it conservatively: the debits stay charged (the work may have run to its end)
and the slots and in-flight work are given back.

Safe on every replica at once: the settle script re-checks, atomically, that the lease
is still expired (mode ``x``) and deletes the record as it settles, so a reservation is
settled once however many reconcilers find it, and a lease renewed meanwhile is left alone.
Finding work is one pipelined ZRANGEBYSCORE over the known namespaces; the rest of the
round trips happen only when something did expire.
"""

from __future__ import annotations

import logging
from typing import Callable, Iterable

from . import policy
from .store import SETTLED, BudgetStore, SettleCall

log = logging.getLogger("tokenward.budget")


class Reconciler:
    SWEEP_EVERY_S = 60.0
    SWEEP_COUNT = 200          # values looked at per namespace per sweep (HSCAN COUNT)
    SWEEP_NAMESPACES = 500     # namespaces per round trip

    def __init__(self, store: BudgetStore, namespaces: Callable[[], Iterable[str]],
                 clock: Callable[[], float], batch: int = 200) -> None:
        self.store = store
        self._namespaces = namespaces
        self._clock = clock
        self.batch = batch
        self.reconciled = 0
        self.swept = 0
        self._swept_at: float | None = None
        self._cursors: dict[str, int] = {}      # namespaces whose sweep is part-way through

    async def sweep_if_due(self) -> int:
        """Every SWEEP_EVERY_S, drop buckets idle long enough to be full (a revoked key's
        per-key buckets would otherwise stay as long as its tenant is active). Exact: a
        missing bucket reads as full. Raises StoreUnavailable."""
        now = self._clock()
        if self._swept_at is not None and now - self._swept_at < self.SWEEP_EVERY_S:
            return 0
        self._swept_at = now
        namespaces = list(self._namespaces())
        dropped = 0
        for at in range(0, len(namespaces), self.SWEEP_NAMESPACES):
            chunk = namespaces[at:at + self.SWEEP_NAMESPACES]
            answers = await self.store.sweep(chunk, [self._cursors.get(ns, 0) for ns in chunk],
                                             int(now * 1000), self.SWEEP_COUNT)
            for ns, (cursor, gone) in zip(chunk, answers):
                if cursor:
                    self._cursors[ns] = cursor
                else:
                    self._cursors.pop(ns, None)
                dropped += gone
        self.swept += dropped
        return dropped

    async def run_once(self, act: bool = True) -> int:
        """Settle what has expired now; returns how many this call settled. Raises StoreUnavailable.

        With ``act=False`` it only looks (proof that the store answers) and settles nothing."""
        now_ms = int(self._clock() * 1000)
        leases_keys = [ns + ":leases" for ns in self._namespaces()]
        found = await self.store.expired(leases_keys, now_ms, self.batch)
        expired = [(key[: -len(":leases")], key, rid) for key, ids in zip(leases_keys, found) for rid in ids]
        if not expired or not act:
            return 0
        record_keys = [f"{ns}:r:{rid}" for ns, _, rid in expired]
        keys = await self.store.record_keys(record_keys)
        # A lease without a record (none should exist) is dropped by the settle that finds nothing.
        calls = [SettleCall(leases_key, rid, record_key, check_keys or (), now_ms, 0, 0, policy.EXPIRED)
                 for (_, leases_key, rid), record_key, check_keys in zip(expired, record_keys, keys)]
        done = sum(1 for answer in await self.store.settle(calls) if answer == SETTLED)
        if done:
            log.warning("reconciled %d reservation(s) whose lease expired (charged in full)", done)
        self.reconciled += done
        return done
