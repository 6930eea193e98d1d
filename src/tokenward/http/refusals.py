"""What the HTTP server answers by itself, before a request reaches the app: OpenAI's error
envelope, as every refusal of the gateway is, on a connection that then closes."""

from __future__ import annotations

import os

from ..errors import Reason, envelope
from .cycle import status_line


class Refused(Exception):
    """Raised from a parser callback: answer with ``reason`` and read no more of the connection."""

    def __init__(self, reason: Reason | None, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def error_response(reason: Reason, message: str, extra: bytes = b"") -> bytes:
    """OpenAI's error envelope, as every refusal is, with a request id of its own: the app
    never saw this request, so the server names it (``req_srv_...``). Like every refusal
    it names its reason in ``x-tokenward-reason`` too."""
    body = envelope(reason, message)
    return (status_line(reason.status) + b"content-type: application/json\r\nx-request-id: req_srv_%s\r\n"
            b"x-tokenward-reason: %s\r\n%sconnection: close\r\ncontent-length: %d\r\n\r\n%s"
            % (os.urandom(8).hex().encode(), reason.name.encode(), extra, len(body), body))
