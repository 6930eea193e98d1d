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
    def __init__(self, store: BudgetStore, namespaces: Callable[[], Iterable[str]],
                 clock: Callable[[], float], batch: int = 200) -> None:
        self.store = store
        self._namespaces = namespaces
        self._clock = clock
        self.batch = batch
        self.reconciled = 0

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
