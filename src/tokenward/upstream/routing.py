"""Which target of a pool takes a request, among those that may (pure: no I/O, no clock).

The pool (upstream/pool.py) hands over the targets that are admitted and have room under
their caps; the strategy picks one:

- ``least_reserved`` (the default): the least outstanding reserved work per unit of weight,
  the sum of the reservations (worst-case prompt + output tokens) of the requests this
  process has in flight there. What the gateway admitted is what an engine has to do.
- ``least_requests``: the fewest requests in flight per unit of weight.
- ``round_robin``: in turn, by weight, whatever is in flight.
- ``prefix_affinity``: the target that served the request's prompt prefix last, while its
  reserved work is within ``affinity_slack`` tokens of the least loaded's; else as
  ``least_reserved`` (upstream/affinity.py).

Ties (sequential requests find every target idle) rotate by weight with smooth weighted
round robin (nginx's): each candidate's turn grows by its weight, the largest is taken and
set back by the candidates' total, so weights 3:1:1 give A B A C A, A B A C A... and no target
gets a burst.
"""

from __future__ import annotations

from typing import Callable, Protocol, Sequence, TypeVar


class Candidate(Protocol):
    weight: int
    turn: int
    requests: int
    tokens: int


C = TypeVar("C", bound=Candidate)


def rotate(candidates: Sequence[C]) -> C:
    """Smooth weighted round robin among ``candidates`` (at least one)."""
    best = candidates[0]
    total = 0
    for candidate in candidates:
        candidate.turn += candidate.weight
        total += candidate.weight
        if candidate.turn > best.turn:
            best = candidate
    best.turn -= total
    return best


def reserved_load(candidate: Candidate) -> float:
    return candidate.tokens / candidate.weight


def request_load(candidate: Candidate) -> float:
    return candidate.requests / candidate.weight


def least_reserved(candidates: Sequence[C]) -> C:
    return _least(candidates, reserved_load)


def least_requests(candidates: Sequence[C]) -> C:
    return _least(candidates, request_load)


def _least(candidates: Sequence[C], load: Callable[[Candidate], float]) -> C:
    if len(candidates) == 1:
        return candidates[0]
    loads = [load(c) for c in candidates]
    low = min(loads)
    tied = [c for c, value in zip(candidates, loads) if value == low]
    return tied[0] if len(tied) == 1 else rotate(tied)


def affine(candidates: Sequence[C], preferred: C | None, slack: int) -> tuple[C, bool]:
    """(the target, whether it is ``preferred``): the target that holds the prefix while it
    is within ``slack`` tokens (per unit of weight) of the least loaded one."""
    if preferred is not None and preferred in candidates:
        low = min(reserved_load(c) for c in candidates)
        if reserved_load(preferred) - low <= slack:
            return preferred, True
    return least_reserved(candidates), False
