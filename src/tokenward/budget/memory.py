"""The in-memory budget store: one process, the embedded default.

Atomic because each call runs to its end without an ``await`` in between, on the one
event loop that owns the store. The arithmetic is ``policy.py``'s, like the Lua scripts'.
"""

from __future__ import annotations

from typing import Callable, Sequence, cast

from . import job_policy, policy
from .policy import BucketState, Check, JobValue, Outcome, Stored
from .store import (ALREADY_RESERVED, LEASE_LIVE, SETTLED, UNKNOWN, JobCreate, JobRecord, LeaseRenewal, ReserveCall,
                    SettleCall)


_NO_LEASES: dict[str, int] = {}  # read-only stand-in for a namespace without leases
# policy.settle or policy.settle_jobs: (states, checks, amounts, debits, tokens, cost, mode, now_ms)
Settle = Callable[[Sequence[Stored], Sequence[Check], Sequence[int], Sequence[int], int, int, str, int], list[Stored]]


class _Record:
    __slots__ = ("checks", "amounts", "debits", "keys", "settle")

    def __init__(self, checks: tuple[Check, ...], amounts: Sequence[int], debits: list[int], keys: tuple[str, ...],
                 settle: Settle = policy.settle) -> None:
        self.checks = checks
        self.amounts = amounts
        self.debits = debits
        self.keys = keys
        self.settle = settle   # policy.settle, or settle_jobs for a job's reservation


class MemoryStore:
    name = "memory"

    def __init__(self) -> None:
        self._values: dict[str, Stored] = {}
        self._expires: dict[str, int] = {}     # spend keys: when their period's key may go
        self._records: dict[str, _Record] = {}
        self._leases: dict[str, dict[str, int]] = {}
        # agent jobs: terms and children (by "<ns>:j:<id>"), open jobs per namespace
        # (id -> deadline), reservations marked dispatched (their record keys)
        self._meta: dict[str, bytes] = {}
        self._children: dict[str, tuple[str, ...]] = {}
        self._open_jobs: dict[str, dict[str, int]] = {}
        self._dispatched: set[str] = set()

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
        outcome, new_states, debits = layout.reserve(states, checks, amounts, call.now_ms)
        if not outcome.ok:
            return outcome
        for c, state in zip(checks, new_states):
            values[c.key] = state
            if c.kind == policy.SPEND:
                self._expires[c.key] = c.p2
        self._records[record_key] = _Record(checks, amounts, debits, layout.keys, layout.settle)
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
            if record.checks[0].kind == policy.JOB and call.record_key not in self._dispatched:
                mode, call = policy.SETTLE, call._replace(tokens=0, cost=0)   # abandoned before dispatch: unused
        if call.keys is not record.keys and tuple(call.keys) != record.keys:
            raise ValueError(f"settle keys do not match the reservation {call.reservation_id}")
        values = self._values
        states = [values.get(key) for key in record.keys]
        new_states = record.settle(states, record.checks, record.amounts, record.debits, call.tokens, call.cost,
                                   mode, call.now_ms)
        for key, c, state in zip(record.keys, record.checks, new_states):
            if c.kind == policy.GAUGE and state == 0:
                values.pop(key, None)
            else:
                values[key] = state   # (a job dropped meanwhile stays None: read as gone)
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
        if self._dispatched:   # dispatch marks of settled reservations (kept off the settle path)
            self._dispatched.intersection_update(self._records)
        out: list[list[str]] = []
        for key in leases_keys:
            leases = self._leases.get(key, {})
            out.append(sorted((rid for rid, until in leases.items() if until < now_ms),
                              key=leases.__getitem__)[:limit])
        return out

    async def record_keys(self, record_keys: Sequence[str]) -> list[list[str] | None]:
        return [list(r.keys) if (r := self._records.get(key)) is not None else None for key in record_keys]

    async def value(self, key: str) -> Stored:
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
        for key in [k for k, v in values.items() if type(v) is JobValue and job_policy.droppable(v, now_ms)]:
            namespace = key[: key.find("}") + 1]
            if namespace in wanted:
                del values[key]
                self._meta.pop(key, None)
                self._children.pop(key, None)
                gone[namespace] = gone.get(namespace, 0) + 3
        return [(0, gone.get(ns, 0)) for ns in namespaces]

    async def warm(self) -> None:
        return None     # nothing to get ready in memory

    async def open_reservations(self, leases_key: str) -> int:
        return len(self._leases.get(leases_key, ()))

    # -- agent jobs ------------------------------------------------------------------------
    async def create_job(self, call: JobCreate) -> tuple[int, int]:
        ns, values = call.namespace, self._values
        parent = None
        if call.parent_id:
            parent = job_policy.Parent(self._job(f"{ns}:j:{call.parent_id}"), call.parent_budget,
                                       call.parent_max_children,
                                       tuple(self._job(f"{ns}:j:{a}") for a in call.ancestor_ids))
        open_jobs = self._open_jobs.setdefault(ns, {})
        for job_id in [j for j, deadline in open_jobs.items() if deadline <= call.now_ms]:
            del open_jobs[job_id]
        bucket_key = f"{ns}:b:jobs"
        bucket = cast("BucketState | None", values.get(bucket_key))   # a ``:b:`` key holds a bucket
        created = job_policy.create(parent, call.budget, call.deadline_ms, len(open_jobs), bucket,
                                    call.limits, call.now_ms)
        if created.status != job_policy.CREATED:
            return created.status, created.retry_ms
        values[bucket_key] = created.bucket
        key = f"{ns}:j:{call.job_id}"
        values[key] = created.job
        self._meta[key] = call.meta
        if parent is not None:
            parent_key = f"{ns}:j:{call.parent_id}"
            values[parent_key] = created.parent
            self._children[parent_key] = (*self._children.get(parent_key, ()), call.job_id)
        open_jobs[call.job_id] = call.deadline_ms
        return created.status, 0

    async def close_jobs(self, namespace: str, jobs: Sequence[tuple[str, int, int]], state: int) -> int:
        keys = [f"{namespace}:j:{job_id}" for job_id, _, _ in jobs]
        closing = [job_policy.Closing(self._job(k), budget, parent)
                   for k, (_, budget, parent) in zip(keys, jobs)]
        values, changed = job_policy.close(closing, state)
        open_jobs = self._open_jobs.get(namespace, {})
        for key, (job_id, _, _), before, after in zip(keys, jobs, closing, values):
            if after is not None and after != before.value:
                self._values[key] = after
                if before.value is None or after.state != before.value.state:
                    open_jobs.pop(job_id, None)
        return changed

    async def dispatch(self, namespace: str, reservation_id: str, chain: Sequence[str], now_ms: int) -> int:
        for job_id in chain:
            why = job_policy.usable(self._job(f"{namespace}:j:{job_id}"), now_ms)
            if why:
                return why
        self._dispatched.add(f"{namespace}:r:{reservation_id}")
        return job_policy.DISPATCH_OK

    async def jobs(self, namespace: str, job_ids: Sequence[str]) -> list[JobRecord]:
        out: list[JobRecord] = []
        for job_id in job_ids:
            key = f"{namespace}:j:{job_id}"
            out.append(JobRecord(self._job(key), self._meta.get(key), self._children.get(key, ())))
        return out

    async def dispatched(self, namespace: str, reservation_id: str) -> bool:
        key = f"{namespace}:r:{reservation_id}"
        return key in self._dispatched and key in self._records

    def _job(self, key: str) -> JobValue | None:
        """The job stored at ``key`` (a ``<ns>:j:<id>`` key holds nothing else), or None."""
        value = self._values.get(key)
        return value if type(value) is JobValue else None

    def _drop_old_periods(self, now_ms: int) -> None:
        old = [key for key, until in self._expires.items() if until <= now_ms]
        for key in old:
            self._values.pop(key, None)
            del self._expires[key]

    async def close(self) -> None:
        return None
