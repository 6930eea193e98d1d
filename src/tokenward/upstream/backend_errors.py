"""A backend's error answer, turned into the gateway's own envelope (pure).

Clients always get OpenAI's error envelope with a reason code, whatever the backend sent
(an empty body, HTML from a load balancer, FastAPI's ``{"detail": ...}``, vLLM's flat
``{"object": "error", "message": ...}``). The status is the gateway's, by what the
backend's says about whose fault it is (docs/reason-codes.md, "Backend errors"):

    backend status            client status   code
    400 404 409 413 422       400             upstream_rejected   the request, as the backend saw it
    408 504                   504             upstream_timeout
    429 503                   503             upstream_overloaded (Retry-After kept, else 1)
    anything else (401 500)   502             upstream_error      the gateway's or the backend's fault

The backend's own message is kept only for ``upstream_rejected`` (it tells the caller
what to change: "Requested tokens (5000) exceed context window of 2048"), and only when
it is short, printable text; the backend's model name in it is replaced by the public
one. Other messages may carry internals (paths, stack traces, the backend credential's
owner) and are replaced by a generic one naming the status.
"""

from __future__ import annotations

import msgspec

from ..errors import Reason, Refusal

_MAX_MESSAGE = 300
_REJECTED = frozenset({400, 404, 409, 413, 422})
_TIMEOUT = frozenset({408, 504})
_OVERLOADED = frozenset({429, 503})


def _message_of(body: bytes) -> str | None:
    """The human message of an error body in any of the usual shapes, else None."""
    if not body:
        return None
    try:
        obj = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    err = obj.get("error")
    if isinstance(err, dict):
        message = err.get("message")
    elif isinstance(err, str):
        message = err
    else:
        message = obj.get("message")
        if message is None:
            message = obj.get("detail")
    if isinstance(message, list):  # FastAPI validation errors: a list of {"msg": ...}
        texts = [m["msg"] for m in message if isinstance(m, dict) and isinstance(m.get("msg"), str)]
        message = "; ".join(texts) if texts else None
    return message if isinstance(message, str) else None


def _safe(message: str | None, backend_model: str, public_model: str | None) -> str | None:
    if message is None:
        return None
    message = " ".join(message.split())
    if not message or len(message) > _MAX_MESSAGE or not message.isprintable():
        return None
    if public_model and backend_model and backend_model != public_model:
        message = message.replace(backend_model, public_model)
    return message


def _describe(status: int, body: bytes) -> str:
    if not body:
        return f"the backend answered {status} with an empty body"
    return f"the backend answered {status}"


def backend_refusal(status: int, body: bytes, retry_after: bytes | None,
                    backend_model: str = "", public_model: str | None = None) -> Refusal:
    """The refusal a client sees for a backend answer with status >= 400."""
    if status in _REJECTED:
        message = _safe(_message_of(body), backend_model, public_model)
        text = f"the backend refused the request: {message}" if message else _describe(status, body)
        return Refusal(Reason.upstream_rejected, text)
    if status in _TIMEOUT:
        return Refusal(Reason.upstream_timeout, f"the backend timed out ({status})")
    if status in _OVERLOADED:
        seconds = retry_after if retry_after is not None and retry_after.strip().isdigit() else b"1"
        return Refusal(Reason.upstream_overloaded, f"the backend is overloaded ({status}); retry shortly",
                       headers=((b"retry-after", seconds.strip()),))
    return Refusal(Reason.upstream_error, _describe(status, body))
