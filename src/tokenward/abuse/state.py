"""One subject's history (a key, or a tenant) and how a batch of its observations updates
it: the reference semantics. The memory store runs this; ``lua/observe.lua`` is the same
for Redis, and a contract test holds them to the same answers.

What is kept, bounded whatever the traffic: the current hour's counters; one peak-hour
output per day for the baseline, dropped past the retention; at most ``max_networks``
network prefix hashes and ``max_capabilities`` capabilities (the least recently seen go
first, and any unseen for the retention); ten one-minute refusal counters; and, for a
tenant, counts per minute of refusals by reason and screening outcomes for the last hour.
"""

from __future__ import annotations

from typing import NamedTuple

REFUSAL_SLOTS = 10
EVENT_MINUTES = 60


class Params(NamedTuple):
    retention_s: int
    baseline_days: int
    min_history_s: int
    novelty_s: int
    refusal_minutes: int
    max_networks: int
    max_capabilities: int


class Batch(NamedTuple):
    """One subject's observations of one batch, aggregated."""

    requests: int
    output: int
    at_max: int
    refusals: int
    networks: dict[str, int]        # prefix hash -> requests
    capabilities: dict[str, int]    # "model:NAME", "tools", "stream" -> requests
    events: dict[str, int]          # "r:<reason>", "s:<kind>:<outcome>" -> count (tenants only)


class Raw(NamedTuple):
    """What the store answers for a subject after a batch: integers only (Lua returns
    integers), turned into signals by ``signals.py``."""

    hour_output: int
    hour_requests: int
    hour_at_max: int
    hour_new_network: int
    hour_new_capability: int
    refusals: int
    baseline_sum: int
    baseline_days: int
    trusted: int          # 1: the subject has min_history of history


class SubjectState:
    __slots__ = ("since", "seen", "hour", "h_out", "h_req", "h_max", "h_new", "h_cap", "days", "nets", "caps",
                 "ring", "events")

    def __init__(self) -> None:
        self.since = -1
        self.seen = 0
        self.hour = -1
        self.h_out = self.h_req = self.h_max = self.h_new = self.h_cap = 0
        self.days: dict[int, int] = {}                   # day -> peak hourly output
        self.nets: dict[str, list[int]] = {}             # hash -> [first seen, last seen]
        self.caps: dict[str, list[int]] = {}
        self.ring: list[list[int]] = [[-1, 0] for _ in range(REFUSAL_SLOTS)]   # [minute, count]
        self.events: dict[str, int] = {}                 # "<minute>|<name>" -> count

    def size(self) -> int:
        """Entries held: what the bounds bound."""
        return len(self.days) + len(self.nets) + len(self.caps) + len(self.events)


def _roll_hour(state: SubjectState, hour: int, retention_days: int) -> None:
    if state.hour >= 0:
        day = state.hour // 24
        if state.h_out > state.days.get(day, 0):
            state.days[day] = state.h_out
    state.hour = hour
    state.h_out = state.h_req = state.h_max = state.h_new = state.h_cap = 0
    today = hour // 24
    for day in [d for d in state.days if d < today - retention_days]:
        del state.days[day]


def _seen(table: dict[str, list[int]], found: dict[str, int], now: int, since: int, p: Params, limit: int) -> int:
    """Record the names seen; how many requests used one that is new."""
    new = 0
    for name, count in found.items():
        entry = table.get(name)
        if entry is None:
            entry = table[name] = [now, now]
        else:
            entry[1] = now
        if now - entry[0] < p.novelty_s and entry[0] - since >= p.min_history_s:
            new += count
    for name in [n for n, (_, last) in table.items() if last < now - p.retention_s]:
        del table[name]
    while len(table) > limit:
        # least recently seen first; ties by name, as the Lua's ZPOPMIN
        del table[min(table, key=lambda n: (table[n][1], n))]
    return new


def update(state: SubjectState, batch: Batch, now: int, p: Params) -> Raw:
    if state.since < 0:
        state.since = now
    hour = now // 3600
    if hour > state.hour:   # a replica's clock behind by a moment counts into the current hour
        _roll_hour(state, hour, p.retention_s // 86400)
    state.seen = now
    state.h_req += batch.requests
    state.h_out += batch.output
    state.h_max += batch.at_max
    state.h_new += _seen(state.nets, batch.networks, now, state.since, p, p.max_networks)
    state.h_cap += _seen(state.caps, batch.capabilities, now, state.since, p, p.max_capabilities)
    minute = now // 60
    slot = state.ring[minute % REFUSAL_SLOTS]
    if slot[0] != minute:
        slot[0], slot[1] = minute, 0
    slot[1] += batch.refusals
    refusals = sum(c for m, c in state.ring if m > minute - p.refusal_minutes)
    if batch.events:
        for name, count in batch.events.items():
            field = f"{minute}|{name}"
            state.events[field] = state.events.get(field, 0) + count
        oldest = minute - EVENT_MINUTES
        for field in [f for f in state.events if int(f.split("|", 1)[0]) <= oldest]:
            del state.events[field]
    today = hour // 24
    peaks = [v for d, v in state.days.items() if today - p.baseline_days <= d <= today and v > 0]
    trusted = 1 if now - state.since >= p.min_history_s else 0
    return Raw(state.h_out, state.h_req, state.h_max, state.h_new, state.h_cap, refusals, sum(peaks),
               len(peaks), trusted)


def expired(state: SubjectState, now: int, p: Params) -> bool:
    """Idle for the whole retention: the sweep drops it."""
    return state.seen < now - p.retention_s
