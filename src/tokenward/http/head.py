"""Rules of a request head that need no connection state: the request target split into
ASGI's path, raw path and query, and which Transfer-Encoding a request may carry."""

from __future__ import annotations

from urllib.parse import unquote

import httptools

from ..errors import Reason
from .refusals import Refused


def split_target(raw_url: bytes) -> tuple[str, bytes, bytes]:
    """(path, raw_path, query_string) of a request target."""
    path = raw_url.decode("latin-1")
    # the usual origin-form target: nothing to parse (str tests: `in` on bytes goes through
    # the buffer protocol, ~2K instructions each)
    if path[:1] == "/" and "?" not in path and "%" not in path and "#" not in path:
        return path, raw_url, b""
    url = httptools.parse_url(raw_url)
    raw_path, query = url.path or b"/", url.query or b""
    path = raw_path.decode("latin-1")
    if "%" in path:
        path = unquote(path)
    return path, raw_path, query


def check_transfer_encoding(value: bytes, http_version: str) -> None:
    """Raise Refused unless the request's Transfer-Encoding is plain ``chunked`` on HTTP/1.1."""
    if value.strip().lower() != b"chunked":
        # The parser would take "gzip, chunked" as chunked and hand on a body still
        # gzip-coded, and read an unknown coding's body to the end of the connection.
        raise Refused(Reason.transfer_encoding_unsupported, "a Transfer-Encoding other than chunked is not supported")
    if http_version == "1.0":
        # HTTP/1.0 has no transfer codings: RFC 9112 calls such framing faulty.
        raise Refused(Reason.malformed_request, "Transfer-Encoding in an HTTP/1.0 request")


# Header fields a request may carry once: a second Host (RFC 9112 3.2), and a second
# credential, which a proxy in front may read one way (the first) and the gateway another.
# Each has a bit in the head's ``seen`` mask.
HOST = 1
ONCE = {b"host": HOST, b"authorization": 2, b"x-api-key": 4}
# Every header name the server itself looks at (server.py ``on_header``).
SPECIAL = frozenset((*ONCE, b"expect", b"transfer-encoding"))


def check_version(version: str, seen: int) -> None:
    """Raise Refused unless the request is HTTP/1.1 with a Host header, or HTTP/1.0. An
    HTTP/0.9 request (a request line without a version) is Refused with no reason: it
    cannot read an HTTP/1.x answer, so the connection is closed without one."""
    if version == "1.1":
        if not seen & HOST:
            raise Refused(Reason.malformed_request, "an HTTP/1.1 request needs a Host header")
    elif version != "1.0":
        if version == "0.9":
            raise Refused(None, "an HTTP/0.9 request")
        raise Refused(Reason.malformed_request, f"HTTP/{version} is not served here")
