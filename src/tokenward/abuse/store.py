"""Where signal state lives: every replica must see the same history, so with a Redis
budget store it is Redis (redis_store.py); with the memory store, this process.

A store answers in batches: one call per batch of subjects, one per batch of campaign
bands; the slots of ``reduce_concurrency`` are taken one per request, but only for a key
under that action.
"""

from __future__ import annotations

import os
from typing import NamedTuple, Protocol, Sequence

from .state import Batch, Params, Raw, SubjectState, expired, update

SEP = "\x1f"   # between tenant and key id in a campaign member


class SubjectCall(NamedTuple):
    subject: str        # "k:<key id>" or "t:<tenant>"
    batch: Batch


class BandCall(NamedTuple):
    band: str           # a band's keyed hash
    member: str         # "<tenant>\x1f<key id>"


class Band(NamedTuple):
    keys: int                 # distinct keys in the band's bucket
    tenants: int              # distinct tenants among them
    members: tuple[str, ...]  # the most recent LISTED of them


LISTED = 64


class SignalStore(Protocol):
    name: str

    async def observe(self, calls: Sequence[SubjectCall], now: int, p: Params) -> list[Raw]: ...

    async def campaign(self, calls: Sequence[BandCall], now: int, window_s: int, max_members: int
                       ) -> list[Band]:
        """Per band: who is in it within the window, this call's member included."""

    async def events(self, tenants: Sequence[str], now: int, window_s: int) -> dict[str, dict[str, int]]:
        """Per tenant: event name -> count over the window (refusals by reason, screening outcomes)."""

    async def take_slot(self, key_id: str, request_id: str, limit: int, now_ms: int, lease_ms: int) -> bool: ...

    async def give_slot(self, key_id: str, request_id: str) -> None: ...

    async def shared_secret(self, candidate: bytes) -> bytes:
        """The secret every replica uses (the first one stored wins)."""

    async def claim(self, name: str, now_ms: int, ttl_ms: int) -> bool:
        """True for the first to claim ``name`` until ``ttl_ms`` passes (one replica acts)."""

    async def sweep(self, now: int, p: Params) -> int:
        """Drop what the retention no longer allows; how many subjects went."""

    async def close(self) -> None: ...


class MemorySignalStore:
    name = "memory"

    def __init__(self) -> None:
        self.subjects: dict[str, SubjectState] = {}
        self.bands: dict[str, dict[str, int]] = {}
        self.slots: dict[str, dict[str, int]] = {}
        self.secret: bytes | None = None
        self.window_s = 3600
        self.claims: dict[str, int] = {}

    async def observe(self, calls: Sequence[SubjectCall], now: int, p: Params) -> list[Raw]:
        out = []
        for subject, batch in calls:
            state = self.subjects.get(subject)
            if state is None:
                state = self.subjects[subject] = SubjectState()
            out.append(update(state, batch, now, p))
        return out

    async def campaign(self, calls: Sequence[BandCall], now: int, window_s: int, max_members: int
                       ) -> list[Band]:
        out = []
        self.window_s = window_s
        for band, member in calls:
            members = self.bands.setdefault(band, {})
            members[member] = now
            for name in [m for m, at in members.items() if at < now - window_s]:
                del members[name]
            while len(members) > max_members:
                del members[min(members, key=lambda m: (members[m], m))]
            recent = tuple(sorted(members, key=lambda m: (members[m], m), reverse=True)[:LISTED])
            out.append(Band(len(members), len({m.split(SEP, 1)[0] for m in members}), recent))
        return out

    async def events(self, tenants: Sequence[str], now: int, window_s: int) -> dict[str, dict[str, int]]:
        first = now // 60 - window_s // 60
        out: dict[str, dict[str, int]] = {}
        for tenant in tenants:
            state = self.subjects.get("t:" + tenant)
            out[tenant] = _window(state.events if state is not None else {}, first)
        return out

    async def take_slot(self, key_id: str, request_id: str, limit: int, now_ms: int, lease_ms: int) -> bool:
        held = self.slots.setdefault(key_id, {})
        for rid in [r for r, until in held.items() if until < now_ms]:
            del held[rid]
        if len(held) >= limit:
            return False
        held[request_id] = now_ms + lease_ms
        return True

    async def give_slot(self, key_id: str, request_id: str) -> None:
        held = self.slots.get(key_id)
        if held is not None:
            held.pop(request_id, None)
            if not held:
                del self.slots[key_id]

    async def shared_secret(self, candidate: bytes) -> bytes:
        if self.secret is None:
            self.secret = candidate
        return self.secret

    async def claim(self, name: str, now_ms: int, ttl_ms: int) -> bool:
        if self.claims.get(name, 0) > now_ms:
            return False
        if len(self.claims) > 10_000:
            self.claims = {n: until for n, until in self.claims.items() if until > now_ms}
        self.claims[name] = now_ms + ttl_ms
        return True

    async def sweep(self, now: int, p: Params) -> int:
        gone = [name for name, state in self.subjects.items() if expired(state, now, p)]
        for name in gone:
            del self.subjects[name]
        stale = now - self.window_s
        for band in [b for b, members in self.bands.items() if not members or max(members.values()) < stale]:
            del self.bands[band]
        return len(gone)

    async def close(self) -> None:
        return None


def _window(events: dict[str, int], first_minute: int) -> dict[str, int]:
    totals: dict[str, int] = {}
    for field, count in events.items():
        minute, name = field.split("|", 1)
        if int(minute) > first_minute:
            totals[name] = totals.get(name, 0) + count
    return totals


def new_secret() -> bytes:
    return os.urandom(32)
