"""The request lifecycle as a transition table; an illegal move raises.

    RECEIVED -> ADMITTING -> [RESERVED ->] FORWARDING -> [STREAMING ->] SETTLED
    ADMITTING or RESERVED -> ANSWERED (a stage answered the request itself: a cache hit)
    any state before SETTLED -> REJECTED (a stage refused) or ABORTED (error, disconnect)
"""

from __future__ import annotations

import enum

from ..errors import IllegalTransition

__all__ = ["IllegalTransition", "Lifecycle", "State", "TERMINAL"]


class State(enum.Enum):
    RECEIVED = "received"
    ADMITTING = "admitting"
    RESERVED = "reserved"
    FORWARDING = "forwarding"
    STREAMING = "streaming"
    SETTLED = "settled"
    REJECTED = "rejected"
    ABORTED = "aborted"
    ANSWERED = "answered"

    # Set once below, for every member: annotations alone make no members.
    bit: int
    allowed: int
    terminal: bool
    text: str   # the value, as a plain attribute: an enum's .value is Python code per read


_R, _AD, _RS, _F, _S, _ST, _RJ, _AB, _AN = State
_TRANSITIONS: dict[State, frozenset[State]] = {
    _R: frozenset({_AD, _RJ, _AB}),
    _AD: frozenset({_RS, _F, _RJ, _AB, _AN}),
    _RS: frozenset({_F, _RJ, _AB, _AN}),
    # A backend's own error response still settles: the backend confirmed the end.
    _F: frozenset({_S, _ST, _RJ, _AB}),
    _S: frozenset({_ST, _AB}),
    _ST: frozenset(),
    _RJ: frozenset(),
    _AB: frozenset(),
    _AN: frozenset(),
}
TERMINAL = frozenset({_ST, _RJ, _AB, _AN})

# Enum members hash in Python code; bit masks keep each move to two attribute reads.
for _i, _state in enumerate(State):
    _state.bit = 1 << _i
    _state.text = _state.value
for _state in State:
    _state.allowed = sum(target.bit for target in _TRANSITIONS[_state])
    _state.terminal = _state in TERMINAL


class Lifecycle:
    __slots__ = ("state",)

    def __init__(self) -> None:
        self.state = State.RECEIVED

    def move(self, target: State) -> None:
        if not target.bit & self.state.allowed:
            raise IllegalTransition(f"{self.state.value} -> {target.value}")
        self.state = target

    @property
    def done(self) -> bool:
        return self.state.terminal
