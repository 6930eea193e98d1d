"""The in-memory budget store: one process, the embedded default.

Atomic because each call runs to its end without an ``await`` in between, on the one
event loop that owns the store. The arithmetic is ``policy.py``'s, like the Lua scripts'.
"""

from __future__ import annotations

from typing import Sequence

from . import policy
from .policy import Check, Outcome
from .store import ALREADY_RESERVED, LEASE_LIVE, SETTLED, UNKNOWN, LeaseRenewal, ReserveCall, SettleCall


_NO_LEASES: dict[str, int] = {}  # read-only stand-in for a namespace without leases


class _Record:
    __slots__ = ("checks", "amounts", "debits", "keys")

    def __init__(self, checks: tuple[Check, ...], amounts: list[int], debits: list[int], keys: tuple[str, ...]) -> None:
        self.checks = checks
        self.amounts = amounts
        self.debits = debits
        self.keys = keys


class MemoryStore:
    name = "memory"

    def __init__(self) -> None:
        self._values: dict[str, object] = {}
        self._expires: dict[str, int] = {}     # spend keys: when their period's key may go
        self._records: dict[str, _Record] = {}
        self._leases: dict[str, dict[str, int]] = {}

    async def reserve(self, calls: Sequence[ReserveCall]) -> list[Outcome]:
        return [self.reserve_now(call) for call in calls]

    def reserve_now(self, call: ReserveCall) -> Outcome:
        layout = call.layout
        record_key = layout.record_key(call.reservation_id)
        if record_key in self._records:
            return ALREADY_RESERVED
        checks = layout.checks
        values = self._values
        amounts = call.amounts
        states = [values.get(key) for key in layout.keys]
        outcome, new_states, debits = policy.reserve(states, checks, amounts, call.now_ms)
        if not outcome.ok:
            return outcome
        for c, state in zip(checks, new_states):
            values[c.key] = state
            if c.kind == policy.SPEND:
                self._expires[c.key] = c.p2
        self._records[record_key] = _Record(checks, amounts, debits, layout.keys)
        leases = self._leases.get(layout.leases_key)
        if leases is None:
            leases = self._leases[layout.leases_key] = {}
        leases[call.reservation_id] = call.lease_until_ms
        return outcome

    async def settle(self, calls: Sequence[SettleCall]) -> list[int]:
        return [self.settle_now(call) for call in calls]

    def settle_now(self, call: SettleCall) -> int:
        record = self._records.get(call.record_key)
        leases = self._leases.get(call.leases_key, _NO_LEASES)
        if record is None:
            if leases:
                leases.pop(call.reservation_id, None)  # an orphaned lease, if any
            return UNKNOWN
        mode = call.mode
        if mode == policy.EXPIRED:
            until = leases.get(call.reservation_id)
            if until is not None and until > call.now_ms:
                return LEASE_LIVE
            mode = policy.FULL
        if call.keys is not record.keys and tuple(call.keys) != record.keys:
            raise ValueError(f"settle keys do not match the reservation {call.reservation_id}")
        values = self._values
        states = [values.get(key) for key in record.keys]
        new_states = policy.settle(states, record.checks, record.amounts, record.debits, call.tokens, call.cost,
                                   mode, call.now_ms)
        for key, c, state in zip(record.keys, record.checks, new_states):
            if c.kind == policy.GAUGE and state == 0:
                values.pop(key, None)
            else:
                values[key] = state
        del self._records[call.record_key]
        if leases:
            leases.pop(call.reservation_id, None)
        return SETTLED

    async def renew(self, renewals: Sequence[LeaseRenewal]) -> None:
        for renewal in renewals:
            leases = self._leases.get(renewal.leases_key)
            if leases is None:
                continue
            for rid in renewal.reservation_ids:
                if rid in leases:
                    leases[rid] = renewal.until_ms

    async def expired(self, leases_keys: Sequence[str], now_ms: int, limit: int) -> list[list[str]]:
        self._drop_old_periods(now_ms)
        out = []
        for key in leases_keys:
            leases = self._leases.get(key, {})
            out.append(sorted((rid for rid, until in leases.items() if until < now_ms),
                              key=leases.__getitem__)[:limit])
        return out

    async def record_keys(self, record_keys: Sequence[str]) -> list[list[str] | None]:
        return [list(r.keys) if (r := self._records.get(key)) is not None else None for key in record_keys]

    async def value(self, key: str) -> object:
        return self._values.get(key)

    async def sweep(self, namespaces: Sequence[str], cursors: Sequence[int], now_ms: int,
                    count: int) -> list[tuple[int, int]]:
        # One pass over every value is cheap here; the cursors and the count are Redis's concern.
        idle_before = now_ms - policy.SWEEP_IDLE_MS
        wanted = set(namespaces)
        gone: dict[str, int] = {}
        values = self._values
        for key in [k for k, v in values.items() if type(v) is tuple and v[1] <= idle_before]:
            namespace = key[: key.find("}") + 1]
            if namespace in wanted:
                del values[key]
                gone[namespace] = gone.get(namespace, 0) + 1
        return [(0, gone.get(ns, 0)) for ns in namespaces]

    async def open_reservations(self, leases_key: str) -> int:
        return len(self._leases.get(leases_key, ()))

    def _drop_old_periods(self, now_ms: int) -> None:
        old = [key for key, until in self._expires.items() if until <= now_ms]
        for key in old:
            self._values.pop(key, None)
            del self._expires[key]

    async def close(self) -> None:
        return None
