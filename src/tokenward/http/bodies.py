"""A small request body read whole, for the gateway's own JSON routes (jobs, admin): the
completion routes stream theirs through the edge stage instead."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import Reason, Refusal

if TYPE_CHECKING:
    from .asgi import Receive


async def read_bounded(receive: Receive, limit: int, what: str) -> bytes | Refusal:
    """The body, or why not: the client left (``client_disconnected``) or sent more than
    ``limit`` bytes (``body_too_large``, naming ``what``)."""
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return Refusal(Reason.client_disconnected, "client went away while sending the body")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return Refusal(Reason.body_too_large, f"{what} is at most {limit} bytes")
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)
