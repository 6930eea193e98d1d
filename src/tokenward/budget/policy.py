"""Budget arithmetic, pure: no I/O and no clock (``now_ms`` is always passed in).

One reservation is a list of *checks*, each against one stored value, applied all or
nothing. The Lua scripts in ``lua/`` mirror ``reserve`` and ``settle`` step for step; the
contract suite runs the same operations on both stores and compares every number.

Check kinds (``kind``) and what their stored value is:

- ``B`` bucket: ``(level, ts_ms)``, refilled continuously. Levels are integers in scaled
  units, ``SCALE`` per unit of amount, so a limit of L per minute refills exactly L scaled
  units per millisecond: the arithmetic is exact, with no float drift. A missing bucket
  is full. ``p1`` = capacity (scaled), ``p2`` = refill per ms.
- ``P`` soft bucket: a bucket that takes what it has (up to the amount) and carries the
  rest to the next check, which must then take it: a tenant's guaranteed share of a
  service capacity, backed by the shared reserve that follows it. Both carry the same
  total amount; at settle the soft check is attributed the actual amount first.
- ``G`` gauge: a count of what is outstanding (open streams, in-flight tokens), given
  back in full at settle. ``p1`` = maximum.
- ``S`` spend: what a period (day, month) has spent, adjusted to the actual cost at
  settle. ``p1`` = cap, ``p2`` = when the period's key may expire (epoch ms).
- ``J`` job: an agent job's counters (``JobValue``), created with the job (a missing one
  refuses). Fits only while the job is open and before its deadline, when ``used +
  amount <= p1`` (its budget) and, if ``p2 > 0``, another attempt is within ``p2``. At
  settle the job is charged the actual amount, never more than it reserved.
- ``A`` ancestor: a job's parent, grandparent...: the same stored value, only read. Fits
  while that job is not cancelled and before its deadline (so cancelling or the deadline
  of a job stops its whole subtree in the same atomic step); an exhausted ancestor does
  not stop children whose budgets it already carved out.

Units (``unit``) say which actual amount a check settles against: ``t`` tokens, ``c``
cost units (micro-USD), ``r`` one request (never refunded: the request was made),
``s`` a slot (given back).

Settle modes: ``s`` settle on known usage, ``f`` charge in full (usage unknown), ``z``
void (undo every debit: a reservation that was never used, e.g. compensation), ``x``
charge in full only if the lease has expired (the reconciler).
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, Final, NamedTuple, Sequence, Union, cast

SCALE: Final = 60_000  # milliseconds per minute: a per-minute limit refills that many scaled units per ms

# Final: a compiled module (tokenward/compiled.py) reads each as a constant, not a global per use
BUCKET: Final = "B"
SOFT: Final = "P"
GAUGE: Final = "G"
SPEND: Final = "S"
JOB: Final = "J"
ANCESTOR: Final = "A"
TOKENS: Final = "t"
COST: Final = "c"
REQUEST: Final = "r"
SLOT: Final = "s"
SETTLE: Final = "s"
FULL: Final = "f"
VOID: Final = "z"
EXPIRED: Final = "x"
# Every rate is per minute, so a bucket idle for a minute is full: the same as no value at
# all. Stores drop buckets idle this long (a minute more for replicas' clocks); lua/sweep.lua
# holds the same number.
SWEEP_IDLE_MS: Final = 120_000


class Check(NamedTuple):
    """One check of a reservation: which stored value, and its limit. Amounts come per call."""

    key: str
    kind: str
    unit: str
    p1: int
    p2: int
    enforce: int   # 1 = enforced, 0 = shadow (recorded as would-reject, never refused)


# A job's states (JobValue.state); "expired" is not stored: it is the deadline passing.
OPEN: Final = 0
EXHAUSTED: Final = 1
CANCELLED: Final = 2


class JobValue(NamedTuple):
    """An agent job's counters, one stored value (the ``J`` and ``A`` checks read it)."""

    used: int          # reserved + spent by its own requests, plus what it carved for children
    held: int          # reserved by its requests still open
    carved: int        # budgets carved out for its children (less what they handed back)
    attempts: int      # admitted requests (a voided reservation is not one)
    open: int          # its requests not settled yet
    children: int
    state: int         # OPEN, EXHAUSTED or CANCELLED
    deadline_ms: int


BucketState = tuple[int, int]   # a bucket's (level in scaled units, ts_ms)
# One stored value, its type set by the kind of the check that reads it: a bucket's (B, P)
# BucketState, a gauge's or spend's (G, S) count, a job's (J, A) JobValue; None while missing.
# mypy cannot follow a tag held in another object, so each branch on ``kind`` casts.
Stored = Union[BucketState, int, JobValue, None]


class Outcome(NamedTuple):
    ok: bool
    failed: int                # index of the first enforced check that did not fit, or -1
    retry_ms: int              # honest wait until every failed bucket fits; -1 = no honest value
    shadow: tuple[int, ...]    # indices of shadow checks that would have refused
    levels: tuple[int, ...]    # per check after the call: bucket level (scaled), gauge count, spent


def refill(state: tuple[int, int] | None, cap: int, rate: int, now_ms: int) -> tuple[int, int]:
    """A bucket's level at ``now_ms`` and the timestamp to store with it.

    A clock behind the stored timestamp (another replica's) refills nothing and never
    moves the timestamp back.
    """
    if state is None:
        return cap, now_ms
    level, ts = state
    if now_ms <= ts:
        return level, ts
    level += (now_ms - ts) * rate
    return (cap if level > cap else level), now_ms


def wait_ms(deficit: int, rate: int) -> int:
    """Whole milliseconds until a bucket refilling ``rate`` per ms gains ``deficit``."""
    return -(-deficit // rate) if rate > 0 else -1


def retry_after_s(retry_ms: int) -> int | None:
    """Whole seconds for Retry-After, rounded up so a client that honours it succeeds."""
    if retry_ms < 0:
        return None
    return max(1, -(-retry_ms // 1000))


def reserve(states: Sequence[Stored], checks: Sequence[Check], amounts: Sequence[int],
            now_ms: int) -> tuple[Outcome, list[Stored], list[int]]:
    """Decide one reservation: (outcome, new states, debits). Nothing is applied unless ok."""
    n = len(checks)
    new_states: list[Stored] = [None] * n
    debits = [0] * n
    levels = [0] * n
    failed = -1
    retry = 0
    shadow: list[int] = []
    carry = -1   # what a soft check left for the check after it (-1: nothing pending)
    # Each state's type follows its check's kind; read untyped rather than through
    # typing.cast, a function call per check of every request.
    stored: Sequence[Any] = states
    for i in range(n):
        _key, kind, _unit, p1, p2, enforce = checks[i]
        # The check after a soft one takes what it left; its own amount is the same total.
        need = amounts[i] if carry < 0 else carry
        carry = -1
        fits = True
        if kind == BUCKET or kind == SOFT:
            level, ts = refill(stored[i], p1, p2, now_ms)
            scaled = need * SCALE
            if kind == SOFT:
                take = min(level // SCALE, need)
                carry = need - take
                debits[i] = take
                level -= take * SCALE
            elif scaled <= level:
                debits[i] = need
                level -= scaled
            else:
                fits = False
                if enforce:
                    w = wait_ms(scaled - level, p2) if scaled <= p1 else -1
                    retry = -1 if w < 0 or retry < 0 else max(retry, w)
            new_states[i] = (level, ts)
            levels[i] = level
        else:
            current = stored[i] or 0
            fits = current + need <= p1
            if fits or not enforce:
                debits[i] = need
                current += need
            elif enforce:
                retry = -1
            new_states[i] = current
            levels[i] = current
        if not fits:
            if enforce:
                if failed < 0:
                    failed = i
            else:
                shadow.append(i)
    if failed >= 0:
        before = [_level_of(states[i], checks[i], now_ms) for i in range(n)]
        return Outcome(False, failed, retry, tuple(shadow), tuple(before)), [], [0] * n
    return Outcome(True, -1, 0, tuple(shadow), tuple(levels)), new_states, debits


def job_checks(checks: Sequence[Check]) -> int:
    """How many ``J`` / ``A`` checks lead a layout (a job's checks always come first)."""
    n = 0
    while n < len(checks) and checks[n].kind in (JOB, ANCESTOR):
        n += 1
    return n


def reserve_jobs(states: Sequence[Stored], checks: Sequence[Check], amounts: Sequence[int],
                 now_ms: int) -> tuple[Outcome, list[Stored], list[int]]:
    """``reserve`` for a layout led by an agent job's checks: those, then the rest through
    ``reserve`` itself, all or nothing. (Only a job's requests take this path, so the
    others pay nothing for jobs.) A job is never in shadow mode."""
    first = job_checks(checks)
    new_states: list[Stored] = [None] * first
    levels = [0] * first
    debits = [0] * first
    failed = -1
    for i in range(first):
        _key, kind, _unit, p1, p2, _enforce = checks[i]
        fits, new_states[i], levels[i], debits[i] = _reserve_job(kind, cast("JobValue | None", states[i]),
                                                                 amounts[i], p1, p2, now_ms)
        if not fits and failed < 0:
            failed = i
    rest, rest_states, rest_debits = reserve(states[first:], checks[first:], amounts[first:], now_ms)
    if failed < 0 and rest.ok:
        return rest._replace(shadow=tuple(first + i for i in rest.shadow), levels=(*levels, *rest.levels)), \
            new_states + rest_states, debits + rest_debits
    before = [s.used if s is not None else -1 for s in cast("Sequence[JobValue | None]", states[:first])]
    if failed >= 0:
        # refused: every level as it was (the rest's too, though it alone would have fit)
        rest_before = [_level_of(states[i], checks[i], now_ms) for i in range(first, len(checks))]
        return Outcome(False, failed, -1, tuple(first + i for i in rest.shadow), (*before, *rest_before)), [], \
            [0] * len(checks)
    return Outcome(False, first + rest.failed, rest.retry_ms, tuple(first + i for i in rest.shadow),
                   (*before, *rest.levels)), [], [0] * len(checks)


def settle_jobs(states: Sequence[Stored], checks: Sequence[Check], amounts: Sequence[int], debits: Sequence[int],
                tokens: int, cost: int, mode: str, now_ms: int) -> list[Stored]:
    """``settle`` for a layout led by an agent job's checks."""
    first = job_checks(checks)
    out: list[Stored] = []
    for i in range(first):
        _key, kind, unit, _p1, _p2, _enforce = checks[i]
        if kind == ANCESTOR:
            out.append(states[i])
        else:
            actual = actual_for(unit, amounts[i], tokens, cost, mode)
            out.append(_settle_job(cast("JobValue | None", states[i]), debits[i], actual, mode == VOID))
    return out + settle(states[first:], checks[first:], amounts[first:], debits[first:], tokens, cost, mode, now_ms)


def _reserve_job(kind: str, job: JobValue | None, need: int, budget: int, max_attempts: int,
                 now_ms: int) -> tuple[bool, JobValue | None, int, int]:
    """A ``J`` or ``A`` check: (fits, the value after, its level (used; -1: no job), debit)."""
    if job is None:
        return False, None, -1, 0
    if kind == ANCESTOR:
        return job.state != CANCELLED and now_ms < job.deadline_ms, job, job.used, 0
    if (job.state != OPEN or now_ms >= job.deadline_ms or job.used + need > budget
            or (max_attempts > 0 and job.attempts >= max_attempts)):
        return False, job, job.used, 0
    # positional: NamedTuple._replace costs several times a plain construction, per request
    used, held, carved, attempts, open_, children, state, deadline = job
    return True, JobValue(used + need, held + need, carved, attempts + 1, open_ + 1, children, state, deadline), \
        used + need, need


def _level_of(state: Stored, c: Check, now_ms: int) -> int:
    if c.kind == BUCKET or c.kind == SOFT:
        return refill(cast("BucketState | None", state), c.p1, c.p2, now_ms)[0]
    return cast("int | None", state) or 0


def actual_for(unit: str, amount: int, tokens: int, cost: int, mode: str) -> int:
    """The actual amount a check settles against."""
    if mode == VOID:
        return 0
    if mode != SETTLE or unit == REQUEST:
        return amount
    if unit == TOKENS:
        return tokens
    if unit == COST:
        return cost
    return 0


def settle(states: Sequence[Stored], checks: Sequence[Check], amounts: Sequence[int], debits: Sequence[int],
           tokens: int, cost: int, mode: str, now_ms: int) -> list[Stored]:
    """New states after settling a reservation against actual usage.

    The actual amount is taken within ``[0, amount]``: a settle never charges more than
    the reservation nor refunds more than it, whatever usage a backend reported. A bucket
    gets back its debit minus the actual amount (capped at capacity, floored at zero); a
    gauge gives back its debit; a spend counter moves by actual minus debit. A soft check
    is attributed the actual amount first, the check after it the rest.
    """
    out: list[Stored] = [None] * len(checks)
    attributed = 0
    void, on_usage = mode == VOID, mode == SETTLE
    stored: Sequence[Any] = states   # as in reserve: no typing.cast call per check
    for i, (_key, kind, unit, p1, p2, _enforce) in enumerate(checks):
        debit = debits[i]
        # actual_for, inlined: this runs once per check of every request
        if void:
            actual = 0
        elif not on_usage or unit == REQUEST:
            actual = amounts[i]
        else:
            actual = tokens if unit == TOKENS else cost if unit == COST else 0
            if actual < 0:
                actual = 0
            elif actual > amounts[i]:
                actual = amounts[i]
        actual -= attributed
        attributed = 0
        if kind == BUCKET or kind == SOFT:
            if kind == SOFT:
                attributed = min(max(actual, 0), debit)
                actual = attributed
            level, ts = refill(stored[i], p1, p2, now_ms)
            level += (debit - actual) * SCALE
            out[i] = (min(max(level, 0), p1), ts)
        elif kind == GAUGE:
            out[i] = max((stored[i] or 0) - debit, 0)
        else:
            out[i] = max((stored[i] or 0) + actual - debit, 0)
    return out


def _settle_job(job: JobValue | None, debit: int, actual: int, void: bool) -> JobValue | None:
    """A job is charged the actual amount, at most what it reserved (so no settle can take
    it over its budget); a voided reservation was not an attempt."""
    if job is None:
        return None   # the job is gone (dropped long after its deadline)
    charged = min(max(actual, 0), debit)
    used, held, carved, attempts, open_, children, state, deadline = job
    return JobValue(max(used - debit + charged, 0), max(held - debit, 0), carved,
                    max(attempts - 1, 0) if void else attempts, max(open_ - 1, 0), children, state, deadline)


def full_after_ms(level: int, cap: int, rate: int) -> int:
    """Milliseconds until a bucket is full again (for x-ratelimit-reset-*)."""
    return wait_ms(cap - level, rate) if level < cap else 0


def format_reset(ms: int) -> str:
    """OpenAI's reset format: ``20ms``, ``1s``, ``6m0s``, ``1h2m3s``."""
    text = _resets.get(ms)
    if text is None:
        if len(_resets) > 8192:
            _resets.clear()
        text = _resets[ms] = _format_reset(ms)
    return text


_resets: dict[int, str] = {}


def format_reset_bytes(ms: int) -> bytes:
    """``format_reset`` as a header value, cached the same way."""
    value = _reset_bytes.get(ms)
    if value is None:
        if len(_reset_bytes) > 8192:
            _reset_bytes.clear()
        value = _reset_bytes[ms] = format_reset(ms).encode()
    return value


_reset_bytes: dict[int, bytes] = {}


def _format_reset(ms: int) -> str:
    if ms < 1000:
        return f"{max(ms, 0)}ms"
    seconds = -(-ms // 1000)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


def micro_usd(usd: float) -> int:
    return round(usd * 1_000_000)


def usd_text(micro: int) -> str:
    """A spend or cap in micro-USD as every page shows it: ``$50.00``, ``$1,234.50``, and a
    fraction of a cent to the micro-dollar (``$0.000033``, never ``$0.00``)."""
    sign = "-" if micro < 0 else ""
    whole, rest = divmod(abs(micro), 1_000_000)
    fraction = f"{rest:06d}".rstrip("0").ljust(2, "0")
    return f"{sign}${whole:,}.{fraction}"


class Prices(NamedTuple):
    """A model's prices in nano-USD per token (per-million USD x 1000), integers."""

    input: int
    output: int

    @classmethod
    def per_million(cls, input_usd: float, output_usd: float) -> "Prices":
        return cls(round(input_usd * 1000), round(output_usd * 1000))

    def cost(self, input_tokens: int, output_tokens: int) -> int:
        """Cost units (micro-USD), rounded up."""
        return -(-(input_tokens * self.input + output_tokens * self.output) // 1000)


FREE: Final = Prices(0, 0)
DAY_MS: Final = 86_400_000


class Periods(NamedTuple):
    day: str
    day_expires_ms: int
    month: str
    month_expires_ms: int


def periods(now_ms: int) -> Periods:
    """UTC day and month ids and when their spend keys may expire (a day after they end)."""
    day = now_ms // DAY_MS
    date = _dt.datetime.fromtimestamp(day * 86_400, _dt.timezone.utc)
    next_month = date.replace(day=1, month=date.month % 12 + 1, year=date.year + (date.month == 12))
    return Periods(str(day), (day + 2) * DAY_MS, f"{date.year:04d}{date.month:02d}",
                   int(next_month.timestamp() * 1000) + DAY_MS)
