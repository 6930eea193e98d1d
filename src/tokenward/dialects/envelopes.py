"""Each dialect's error envelope, from the gateway's reason code and HTTP status.

``/v1/responses`` keeps OpenAI's ``{"error": {"message", "type", "param", "code"}}`` (the
envelope of ``errors.envelope``, here from a code string). ``/v1/messages`` gets Anthropic's
``{"type": "error", "error": {"type", "message"}}``, plus ``error.code`` carrying the
gateway's reason code (an extra field the SDK keeps on the exception's ``body``), so a
client or a test can tell refusals apart the same way on every route.
"""

from __future__ import annotations

from typing import Any

from .common import encode

# Reason codes whose Anthropic type is not the one their status implies.
_ANTHROPIC_BY_REASON = {
    "upstream_overloaded": "overloaded_error",
    "body_too_large": "request_too_large",
    "upstream_timeout": "timeout_error",
    "stream_duration_exceeded": "timeout_error",
    "stream_idle_timeout": "timeout_error",
    "route_denied": "not_found_error",
    "unknown_model": "not_found_error",
    "job_not_found": "not_found_error",
}
_ANTHROPIC_BY_STATUS = {
    400: "invalid_request_error", 401: "authentication_error", 402: "billing_error", 403: "permission_error",
    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
    502: "api_error", 503: "overloaded_error", 504: "timeout_error", 529: "overloaded_error",
}


def anthropic_error_type(code: str, status: int) -> str:
    """Anthropic's error ``type`` for a gateway reason code and its HTTP status."""
    known = _ANTHROPIC_BY_REASON.get(code) or _ANTHROPIC_BY_STATUS.get(status)
    if known is not None:
        return known
    return "api_error" if status >= 500 else "invalid_request_error"


def messages_error_body(code: str, status: int, message: str, request_id: str | None = None,
                        param: str | None = None) -> bytes:
    """Anthropic's error envelope for ``/v1/messages`` and ``/v1/messages/count_tokens``;
    ``code`` and ``param`` (the field refused, in the request's own terms) are extra fields
    the SDK keeps on the exception's ``body``."""
    error: dict[str, Any] = {"type": anthropic_error_type(code, status), "message": message, "code": code}
    if param is not None:
        error["param"] = param
    body: dict[str, Any] = {"type": "error", "error": error}
    if request_id is not None:
        body["request_id"] = request_id
    return encode(body)


def responses_error_body(code: str, error_type: str, message: str, param: str | None = None) -> bytes:
    """OpenAI's error envelope for ``/v1/responses`` (what ``errors.envelope`` writes)."""
    return encode({"error": {"message": message, "type": error_type, "param": param, "code": code}})


def error_body(dialect: str, code: str, status: int, error_type: str, message: str,
               param: str | None = None) -> bytes:
    """The envelope of ``dialect`` (``chat``, ``responses`` or ``messages``)."""
    if dialect == "messages":
        return messages_error_body(code, status, message, param=param)
    return responses_error_body(code, error_type, message, param)
