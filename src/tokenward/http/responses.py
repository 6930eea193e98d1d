"""Writing responses to the ASGI ``send`` callable; header lists are built once."""

from __future__ import annotations

from typing import Awaitable, Callable

from ..errors import Refusal, refusal_body
from .cycle import RequestCycle

Send = Callable[[dict], Awaitable[None]]
Headers = list[tuple[bytes, bytes]]

JSON = (b"content-type", b"application/json")
SSE_HEADERS: Headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
# The official SDKs stop retrying when they see this.
NO_RETRY = (b"x-should-retry", b"false")


async def send_bytes(send: Send, status: int, headers: Headers, body: bytes) -> None:
    headers.append((b"content-length", b"%d" % len(body)))
    # Under the gateway's own server, one call instead of two ASGI messages.
    cycle = getattr(send, "__self__", None)
    if type(cycle) is RequestCycle and cycle.respond_now(status, headers, body):
        return
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def send_json(send: Send, status: int, body: bytes, request_id: bytes,
                    extra: Headers | tuple = ()) -> None:
    headers = [JSON, (b"x-request-id", request_id)]
    if extra:
        headers.extend(extra)
    await send_bytes(send, status, headers, body)


async def send_refusal(send: Send, refusal: Refusal, request_id: bytes) -> None:
    await send_json(send, refusal.status, refusal_body(refusal), request_id, refusal.headers)


def sse_error_event(refusal: Refusal) -> bytes:
    """An in-band error for a stream already started: the SDKs raise it as an APIError."""
    return b"data: " + refusal_body(refusal) + b"\n\n"
