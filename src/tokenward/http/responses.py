"""Writing responses to the ASGI ``send`` callable; header lists are built once."""

from __future__ import annotations

from ..errors import Reason, Refusal, refusal_body
from .asgi import Send
from .cycle import RequestCycle

Headers = list[tuple[bytes, bytes]]

JSON = (b"content-type", b"application/json")
SSE_HEADERS: Headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
# The official SDKs stop retrying when they see this.
NO_RETRY = (b"x-should-retry", b"false")
# Every refusal names its reason code in a header too, whatever its body's shape
# (shared/spec/interfaces.md): one tuple per code, built once.
_REASON_HEADERS = {reason: (b"x-tokenward-reason", reason.name.encode()) for reason in Reason}


def reason_header(reason: Reason) -> tuple[bytes, bytes]:
    return _REASON_HEADERS[reason]


def code_header(code: str) -> tuple[bytes, bytes]:
    """The header for a code outside ``Reason`` (the admin API's own: ``key_not_found``...)."""
    return (b"x-tokenward-reason", code.encode("ascii", "replace"))


async def send_bytes(send: Send, status: int, headers: Headers, body: bytes) -> None:
    headers.append((b"content-length", b"%d" % len(body)))
    # Under the gateway's own server, one call instead of two ASGI messages.
    cycle = getattr(send, "__self__", None)
    if type(cycle) is RequestCycle and cycle.respond_now(status, headers, body):
        return
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def send_json(send: Send, status: int, body: bytes, request_id: bytes,
                    extra: Headers | tuple[tuple[bytes, bytes], ...] = ()) -> None:
    headers = [JSON, (b"x-request-id", request_id)]
    if extra:
        headers.extend(extra)
    await send_bytes(send, status, headers, body)


async def send_refusal(send: Send, refusal: Refusal, request_id: bytes) -> None:
    headers = [JSON, (b"x-request-id", request_id), _REASON_HEADERS[refusal.reason]]
    if refusal.headers:
        headers.extend(refusal.headers)
    await send_bytes(send, refusal.status, headers, refusal_body(refusal))


def sse_error_event(refusal: Refusal) -> bytes:
    """An in-band error for a stream already started: the SDKs raise it as an APIError."""
    return b"data: " + refusal_body(refusal) + b"\n\n"
