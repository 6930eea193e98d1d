"""Per-request steering of the mock upstream, read from ``x-mock-*`` request headers.

The gateway forwards ``x-mock-*`` headers untouched, so a test can shape a backend's
behaviour (length, pace, faults) through the gateway without a side channel.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Iterable

import msgspec

TOKENS = b"x-mock-tokens"
TOKEN_RATE = b"x-mock-token-rate"
DELAY_MS = b"x-mock-delay-ms"
HANG = b"x-mock-hang"
STALL_AFTER = b"x-mock-stall-after"
DIE_AFTER = b"x-mock-die-after"
STATUS = b"x-mock-status"
NO_USAGE = b"x-mock-no-usage"
HOLD = b"x-mock-hold"
RETRY_AFTER = b"x-mock-retry-after"
ERROR_BODY = b"x-mock-error-body"
ECHO = b"x-mock-echo"
TOOL_CALL = b"x-mock-tool-call"
TOOL_ARGS = b"x-mock-tool-args"
TOOL_ONCE = b"x-mock-tool-once"
ERROR_BODIES = ("json", "empty", "text", "detail")

HEADER_NAMES = tuple(
    h.decode()
    for h in (TOKENS, TOKEN_RATE, DELAY_MS, HANG, STALL_AFTER, DIE_AFTER, STATUS, NO_USAGE, HOLD, RETRY_AFTER,
              ERROR_BODY, ECHO, TOOL_CALL, TOOL_ARGS, TOOL_ONCE)
)

DEFAULT_TOKENS = 16
_PREFIX = b"x-mock-"
_TRUE = frozenset((b"1", b"true", b"yes", b"on"))


class BadRequest(ValueError):
    """A request the mock cannot serve as asked (answered with a 400 envelope)."""


class SteeringError(BadRequest):
    """A steering header whose value cannot be used."""


@dataclass(slots=True)
class Steering:
    tokens: int | None = None
    rate: float = 0.0
    delay_ms: float = 0.0
    hang: bool = False
    stall_after: int | None = None
    die_after: int | None = None
    status: int | None = None
    no_usage: bool = False
    hold: str | None = None
    retry_after: str | None = None
    # the shape of an x-mock-status answer's body: OpenAI's envelope ("json"), none,
    # plain text as a proxy in front of a backend answers, or FastAPI's {"detail": ...}
    error_body: str = "json"
    # answer with the request's own last text, this many characters a chunk (mock/echo.py)
    echo: int | None = None
    tool_call: str | None = None
    # the call's arguments as sent (a JSON object's text) instead of {"echo": <last user text>}
    tool_args: str | None = None
    # call only while the conversation holds no tool result yet; after one, answer text:
    # an agent's tool round trip (call, result, text) under one unchanging header set
    tool_once: bool = False

    @property
    def plain(self) -> bool:
        """True when the request can take the lean path: no waiting, no faults."""
        return (
            self.rate == 0.0
            and self.delay_ms == 0.0
            and not self.hang
            and self.stall_after is None
            and self.die_after is None
            and self.hold is None
        )

    @property
    def cut_after(self) -> int | None:
        """Token steps after which the response stops (stall or die), if any."""
        if self.die_after is None:
            return self.stall_after
        if self.stall_after is None:
            return self.die_after
        return min(self.die_after, self.stall_after)


# Shared by every request without steering headers; never mutated.
PLAIN = Steering()


def _int(name: bytes, value: bytes, low: int = 0, high: int | None = None) -> int:
    try:
        n = int(value)
    except ValueError:
        raise SteeringError(f"{name.decode()}: expected an integer, got {value!r}") from None
    if n < low or (high is not None and n > high):
        bound = f"{low}..{high}" if high is not None else f">= {low}"
        raise SteeringError(f"{name.decode()}: expected {bound}, got {n}")
    return n


def _float(name: bytes, value: bytes) -> float:
    try:
        x = float(value)
    except ValueError:
        raise SteeringError(f"{name.decode()}: expected a number, got {value!r}") from None
    if not math.isfinite(x) or x < 0:
        raise SteeringError(f"{name.decode()}: expected a finite number >= 0, got {x}")
    return x


def _json_object(name: bytes, value: bytes) -> str:
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise SteeringError(f"{name.decode()}: expected a JSON object")
    return value.decode()


def tool_arguments(steer: Steering, text: str) -> str:
    """The steered call's arguments, as the JSON text a backend sends."""
    return steer.tool_args if steer.tool_args is not None else msgspec.json.encode({"echo": text}).decode()


def parse_steering(headers: Iterable[tuple[bytes, bytes]]) -> Steering:
    """Read steering from ASGI headers (names already lowercased by the server)."""
    steer = PLAIN
    for name, raw in headers:
        if not name.startswith(_PREFIX):
            continue
        if steer is PLAIN:
            steer = Steering()
        _apply(steer, name, raw.strip())
    return steer


def _apply(steer: Steering, name: bytes, value: bytes) -> None:
    if name == TOKENS:
        steer.tokens = _int(name, value)
    elif name == TOKEN_RATE:
        steer.rate = _float(name, value)
    elif name == DELAY_MS:
        steer.delay_ms = _float(name, value)
    elif name == HANG:
        steer.hang = value.lower() in _TRUE
    elif name == STALL_AFTER:
        steer.stall_after = _int(name, value)
    elif name == DIE_AFTER:
        steer.die_after = _int(name, value)
    elif name == STATUS:
        steer.status = _int(name, value, 400, 599)
    elif name == NO_USAGE:
        steer.no_usage = value.lower() in _TRUE
    elif name == HOLD:
        steer.hold = value.decode("latin-1") or None
    elif name == RETRY_AFTER:
        steer.retry_after = value.decode("latin-1")
    elif name == ECHO:
        steer.echo = _int(name, value, 1, 1_000_000)
    elif name == TOOL_CALL:
        steer.tool_call = value.decode("latin-1") or None
    elif name == TOOL_ARGS:
        steer.tool_args = _json_object(name, value)
    elif name == TOOL_ONCE:
        steer.tool_once = value.lower() in _TRUE
    elif name == ERROR_BODY:
        shape = value.decode("latin-1").lower()
        if shape not in ERROR_BODIES:
            raise SteeringError(f"x-mock-error-body: expected one of {', '.join(ERROR_BODIES)}")
        steer.error_body = shape
    # Unknown x-mock-* headers are ignored so newer tests run against older mocks.


def output_tokens(steer: Steering, body: dict[str, Any]) -> tuple[int, bool]:
    """Tokens to generate per choice, and whether that count was capped by max_tokens.

    The cap decides finish_reason: "length" when the limit was hit, else "stop".
    """
    limit = body.get("max_tokens")
    if limit is None:
        limit = body.get("max_completion_tokens")
    if limit is not None and (type(limit) is not int or limit < 0):
        raise BadRequest("max_tokens: expected an integer >= 0")
    wanted = DEFAULT_TOKENS if steer.tokens is None else steer.tokens
    if limit is not None and limit <= wanted:
        return limit, True
    return wanted, False
