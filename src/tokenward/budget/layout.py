"""A namespace's checks for one kind of caller (``Layout``): what a reservation and its
settle read of every check, built once and reused per request.

A module of its own so that it is compiled with the hot path (tokenward/compiled.py):
``store.py`` holds an exception subclass, which a compiled module may not. ``store.py``
re-exports it under its old name.
"""

from __future__ import annotations

from typing import Sequence

from . import policy
from .policy import BUCKET, SCALE, SOFT, Check


class Layout:
    """The checks of one namespace for one kind of caller, built once and reused per request.

    ``wire`` is free for a store to cache what it derives from the layout (encoded bytes).
    """

    __slots__ = ("namespace", "leases_key", "checks", "keys", "wire", "jobs", "reserve", "settle")

    def __init__(self, namespace: str, checks: Sequence[Check]) -> None:
        self.namespace = namespace
        self.leases_key = namespace + ":leases"
        self.checks = tuple(checks)
        # An agent job's checks lead the layout; its arithmetic, picked once (policy.py).
        self.jobs = policy.job_checks(self.checks)
        self.reserve = policy.reserve_jobs if self.jobs else policy.reserve
        self.settle = policy.settle_jobs if self.jobs else policy.settle
        for c in self.checks:
            # The idle sweep (lua/sweep.lua) relies on every bucket refilling in a minute.
            if c.kind in (BUCKET, SOFT) and c.p1 > c.p2 * SCALE:
                raise ValueError(f"bucket {c.key} takes longer than a minute to refill")
        self.keys = tuple(c.key for c in self.checks)
        self.wire: object = None

    def record_key(self, reservation_id: str) -> str:
        return self.namespace + ":r:" + reservation_id
