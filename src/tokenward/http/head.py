"""Rules of a request head that need no connection state: the request target split into
ASGI's path, raw path and query, and which Transfer-Encoding a request may carry."""

from __future__ import annotations

from urllib.parse import unquote

import httptools

from ..errors import Reason
from .refusals import Refused


def split_target(raw_url: bytes) -> tuple[str, bytes, bytes]:
    """(path, raw_path, query_string) of a request target."""
    if raw_url[:1] == b"/" and b"?" not in raw_url and b"%" not in raw_url and b"#" not in raw_url:
        return raw_url.decode("latin-1"), raw_url, b""   # the usual origin-form target: nothing to parse
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
