"""The ``BudgetStore`` protocol: where budgets live, and its one error.

A store applies the arithmetic of ``policy.py`` atomically per *call*; one call touches
the keys of one namespace only (``tw:{t:<tenant>}`` or ``tw:{u:<upstream>}``: the braces
are a Redis Cluster hash tag, so every key of a call lands in one slot). Methods take a
batch of calls and answer in one round trip; the calls of a batch are independent of
each other, each all or nothing.

Every failure to reach or use the storage is raised as ``StoreUnavailable``, whatever
the driver said, so callers handle exactly one exception type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, NamedTuple, Protocol, Sequence, runtime_checkable

from ..errors import TokenwardError
from .layout import Layout as Layout   # its home before it was compiled (tokenward/compiled.py)
from . import policy
from .policy import JobValue, Outcome

if TYPE_CHECKING:
    from .job_policy import Limits


class StoreUnavailable(TokenwardError):
    """The budget store could not be reached or did not answer in time."""


class ScriptMissing(Exception):
    """The server does not know a script (restarted, failed over, flushed)."""


class ReserveCall(NamedTuple):
    layout: Layout
    reservation_id: str
    now_ms: int
    lease_until_ms: int
    amounts: Sequence[int]      # one per check of the layout


class SettleCall(NamedTuple):
    leases_key: str
    reservation_id: str
    record_key: str
    keys: Sequence[str]        # the checks' keys, in the order they were reserved
    now_ms: int
    tokens: int                # actual tokens (ignored in modes f, z, x)
    cost: int                  # actual cost units
    mode: str                  # policy.SETTLE | FULL | VOID | EXPIRED
    layout: Layout | None = None   # when known, lets a store reuse what it cached


class LeaseRenewal(NamedTuple):
    leases_key: str
    until_ms: int
    reservation_ids: Sequence[str]


class JobCreate(NamedTuple):
    """Create an agent job in a tenant's namespace (job_policy.create)."""

    namespace: str
    job_id: str
    now_ms: int
    deadline_ms: int
    budget: int
    limits: Limits
    meta: bytes                 # the job's fixed terms (JSON), stored as given
    parent_id: str = ""         # "" for a job without a parent
    parent_budget: int = 0
    parent_max_children: int = 0
    ancestor_ids: Sequence[str] = ()   # the parent's own ancestors, nearest first


class JobRecord(NamedTuple):
    """What a store holds for one job: its counters, its terms (JSON), its children's ids."""

    value: JobValue | None      # None when there is no such job
    meta: bytes | None
    children: tuple[str, ...]


# settle answers (Final: constants in the compiled modules that read them)
SETTLED: Final = 1
UNKNOWN: Final = 0
LEASE_LIVE: Final = -1
ALREADY_RESERVED: Final = Outcome(True, -1, 0, (), ())


class BudgetStore(Protocol):
    name: str

    async def reserve(self, calls: Sequence[ReserveCall]) -> list[Outcome]:
        """Apply each call all or nothing; a call whose record exists answers ALREADY_RESERVED."""

    async def settle(self, calls: Sequence[SettleCall]) -> list[int]:
        """SETTLED, UNKNOWN (no such reservation: already settled) or LEASE_LIVE (mode x)."""

    async def renew(self, renewals: Sequence[LeaseRenewal]) -> None:
        """Push the lease of each still-open reservation to ``until_ms``."""

    async def expired(self, leases_keys: Sequence[str], now_ms: int, limit: int) -> list[list[str]]:
        """Reservation ids whose lease ended before ``now_ms``, per leases key."""

    async def record_keys(self, record_keys: Sequence[str]) -> list[list[str] | None]:
        """The check keys a reservation recorded (None when it is gone)."""

    async def value(self, key: str) -> policy.Stored:
        """A stored value as policy sees it (bucket tuple, int, JobValue or None); for tests and tools."""

    async def sweep(self, namespaces: Sequence[str], cursors: Sequence[int], now_ms: int,
                    count: int) -> list[tuple[int, int]]:
        """Drop bucket values idle for ``policy.SWEEP_IDLE_MS`` (full again: the same as none),
        looking at about ``count`` values per namespace from its cursor; per namespace,
        (the cursor to continue from, 0 when done; how many were dropped)."""

    async def warm(self) -> None:
        """Get ready before traffic (a cluster recognised, scripts loaded); may fail, and
        the store recovers alone."""

    async def open_reservations(self, leases_key: str) -> int:
        """How many reservations of a namespace hold a lease."""

    # -- agent jobs (budget/job_policy.py; docs/jobs.md) --------------------------------
    async def create_job(self, call: JobCreate) -> tuple[int, int]:
        """(status, retry_ms): job_policy.CREATED or why not, all or nothing."""

    async def close_jobs(self, namespace: str, jobs: Sequence[tuple[str, int, int]], state: int) -> int:
        """Move jobs (id, budget, index of its parent in ``jobs`` or -1), children listed
        before their parents, to ``state`` (job_policy.close; a budget below 0 only takes
        back a child's hand-back); how many changed."""

    async def dispatch(self, namespace: str, reservation_id: str, chain: Sequence[str], now_ms: int) -> int:
        """Before a job's request goes to a backend: job_policy.DISPATCH_OK (and the
        reservation marked dispatched) or why not (the first of the chain that is not usable)."""

    async def jobs(self, namespace: str, job_ids: Sequence[str]) -> list[JobRecord]:
        """What is stored for each job (value None: no such job)."""

    async def dispatched(self, namespace: str, reservation_id: str) -> bool:
        """Whether a reservation was marked dispatched (tests and tools)."""

    async def close(self) -> None: ...


@runtime_checkable
class ImmediateStore(BudgetStore, Protocol):
    """A store whose reserve and settle complete without awaiting (the memory store): the
    same atomic step called directly, without a coroutine per call on the hot path."""

    def reserve_now(self, call: ReserveCall) -> Outcome: ...

    def settle_now(self, call: SettleCall) -> int: ...
