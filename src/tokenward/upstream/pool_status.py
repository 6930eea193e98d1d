"""The shape of a pool's state as the status page shows it (upstream/pool.py ``snapshot``;
control/status.py reads it, control/status_html.py renders it). One process's view: what it
has in flight on each target and whether it has ejected it. The only address is a target's
host:port, as /metrics labels it."""

from __future__ import annotations

from typing import NotRequired, TypedDict


class TargetStatus(TypedDict):
    target: str                        # host:port
    up: bool                           # admitted (False: ejected)
    weight: int
    inflight_requests: int
    inflight_tokens: int               # reserved, prompt + output, of the requests in flight
    max_inflight_requests: int | None  # None: no cap
    max_inflight_tokens: int | None
    ejected_for_s: float               # 0 while admitted
    ejections: int
    failures_in_a_row: int
    failed: int
    last_failure: str                  # what kind ("unreachable", "answered 503"...), "" before any
    probe: str                         # the latest probe's outcome, or that none ran
    sent: int


class AffinityStatus(TypedDict):
    hits: int                          # sent where their prefix was last
    moved: int                         # their prefix's target was too loaded or out
    new: int                           # no prefix of theirs known here
    hit_rate: float | None             # hits over known prefixes; None before any


class PoolStatus(TypedDict):
    routing: str
    targets: list[TargetStatus]
    saturated: int                     # requests refused upstream_saturated
    failovers: int                     # attempts handed on to another target
    waiting: int                       # in the queue now
    affinity: NotRequired[AffinityStatus]   # only with routing: prefix_affinity over several targets
