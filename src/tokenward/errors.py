"""Reason codes and the one error tree of the gateway.

    TokenwardError
      ConfigError            a config file that does not load (path + message)
      Refusal                a request ends early with a reason code (never a 500)

Every refusal a client can see is a member of the closed ``Reason`` enum, which fixes
its HTTP status and OpenAI error type. Only these messages reach a client; anything
else is mapped to ``internal_error`` at the HTTP boundary with no detail.
"""

from __future__ import annotations

import enum
from typing import final

import msgspec

_INVALID = "invalid_request_error"
_AUTH = "authentication_error"
_PERM = "permission_error"
_RATE = "rate_limit_error"
_UPSTREAM = "api_error"


class Reason(enum.Enum):
    """A stable reason code, with its HTTP status and OpenAI error type.

    Members are declared as ``(status, type)``; each gets its own value (its position),
    since members with equal tuples would otherwise silently become aliases.
    """

    status: int
    error_type: str

    def __new__(cls, status: int, error_type: str) -> "Reason":
        member = object.__new__(cls)
        member._value_ = len(cls.__members__)
        member.status = status
        member.error_type = error_type
        return member

    # edge
    route_denied = (404, _INVALID)
    method_not_allowed = (405, _INVALID)
    unsupported_media_type = (415, _INVALID)
    body_too_large = (413, _INVALID)
    headers_too_large = (431, _INVALID)
    # identity
    missing_credentials = (401, _AUTH)
    invalid_credentials = (401, _AUTH)
    credentials_expired = (401, _AUTH)
    key_revoked = (401, _AUTH)
    key_suspended = (403, _PERM)
    key_scope_denied = (403, _PERM)
    keystore_unavailable = (503, _UPSTREAM)
    # control: abuse actions and operator controls (stages/s07_control.py); the code says
    # which action applies, never which signal fired
    key_restricted = (403, _PERM)
    key_concurrency_reduced = (429, _RATE)
    capability_paused = (403, _PERM)
    stream_cancelled = (503, _UPSTREAM)
    # entitlement
    model_not_entitled = (403, _PERM)
    tools_not_entitled = (403, _PERM)
    files_not_entitled = (403, _PERM)
    system_prompt_not_allowed = (403, _PERM)
    feature_not_entitled = (403, _PERM)
    # validation
    invalid_json = (400, _INVALID)
    json_too_deep = (400, _INVALID)
    unknown_field = (400, _INVALID)
    invalid_field = (400, _INVALID)
    max_tokens_required = (400, _INVALID)
    outer_item_limit = (400, _INVALID)
    choices_limit = (400, _INVALID)
    best_of_denied = (400, _INVALID)
    structured_output_denied = (400, _INVALID)
    remote_media_denied = (400, _INVALID)
    attachment_rejected = (400, _INVALID)
    attachments_unavailable = (503, _UPSTREAM)   # the sandboxed file reader could not start
    hidden_characters = (400, _INVALID)
    unknown_model = (404, _INVALID)
    model_route_unsupported = (400, _INVALID)  # a model not declared for this route (embeddings)
    # work
    context_too_large = (400, _INVALID)
    aggregate_work_limit = (400, _INVALID)
    # admission
    token_budget = (429, _RATE)
    rate_limited = (429, _RATE)
    concurrency_limit = (429, _RATE)
    spend_cap = (429, _RATE)
    job_budget_exhausted = (429, _RATE)
    job_expired = (429, _RATE)              # terminal, like job_budget_exhausted
    job_cancelled = (409, _INVALID)
    job_not_found = (404, _INVALID)
    budget_store_unavailable = (503, _UPSTREAM)
    # screening
    content_blocked = (400, _INVALID)
    screening_unavailable = (503, _UPSTREAM)
    # forward
    upstream_unavailable = (502, _UPSTREAM)
    upstream_timeout = (504, _UPSTREAM)
    upstream_error = (502, _UPSTREAM)
    upstream_rejected = (400, _INVALID)     # the backend refused the request itself (4xx)
    upstream_overloaded = (503, _UPSTREAM)  # the backend said 429 or 503
    upstream_saturated = (503, _UPSTREAM)   # every target of the pool is at its cap (upstream/pool.py)
    upstream_truncated = (502, _UPSTREAM)   # a stream ended before its answer was finished
    stream_duration_exceeded = (504, _UPSTREAM)
    stream_idle_timeout = (504, _UPSTREAM)
    client_disconnected = (499, _INVALID)
    # the boundary's last resort: a bug, reported without detail
    internal_error = (500, _UPSTREAM)
    # the HTTP server, before the request reaches the pipeline (no decision record)
    malformed_request = (400, _INVALID)
    request_timeout = (408, _INVALID)
    transfer_encoding_unsupported = (501, _INVALID)
    shutting_down = (503, _UPSTREAM)
    too_many_connections = (503, _UPSTREAM)



class TokenwardError(Exception):
    """Root of every error the gateway raises on purpose."""


class ConfigError(TokenwardError):
    """A config that does not load; ``str()`` is ``path: message``."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}" if path else message)


class MissingExtra(ConfigError):
    """A part of the config needs an optional extra that is not installed: an error where
    the part is used, a warning where it is only declared (a screening policy no plan uses)."""


class IllegalTransition(RuntimeError):
    """A request's lifecycle asked to move where its transition table does not go
    (pipeline/lifecycle.py): a bug in the gateway, never the client's doing."""


@final   # no subclass: ``type(x) is Refusal`` (the hot path's test) then narrows both ways
class Refusal(TokenwardError):
    """A request ends early. Raised by code below a stage; stages may return it too."""

    __slots__ = ("reason", "message", "param", "headers")

    def __init__(
        self,
        reason: Reason,
        message: str,
        *,
        param: str | None = None,
        headers: tuple[tuple[bytes, bytes], ...] = (),
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.param = param
        self.headers = headers

    @property
    def status(self) -> int:
        return self.reason.status


class _ErrorBody(msgspec.Struct, omit_defaults=False):
    message: str
    type: str
    param: str | None
    code: str


class _Envelope(msgspec.Struct):
    error: _ErrorBody


_encode = msgspec.json.Encoder().encode


def envelope(reason: Reason, message: str, param: str | None = None) -> bytes:
    """OpenAI's error envelope, which the SDKs map to their exception types."""
    return _encode(_Envelope(_ErrorBody(message, reason.error_type, param, reason.name)))


def refusal_body(refusal: Refusal) -> bytes:
    return envelope(refusal.reason, refusal.message, refusal.param)
