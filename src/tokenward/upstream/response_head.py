"""What every upstream transport's response shares (the client's, upstream/_conn.py; the
in-process one, upstream/memory.py): the errors a request can end in, and the head's
lookups (a header's value, whether the whole body has arrived)."""

from __future__ import annotations


class UpstreamError(Exception):
    def __init__(self, detail: str = "upstream error") -> None:
        super().__init__(detail)
        self.detail = detail


class UpstreamConnectError(UpstreamError):
    pass


class UpstreamTimeout(UpstreamError):
    def __init__(self, detail: str = "upstream timed out", phase: str = "read") -> None:
        super().__init__(detail)
        self.phase = phase


class UpstreamProtocolError(UpstreamError):
    pass


class UpstreamNoAnswer(UpstreamProtocolError):
    """The connection closed (or was reset) after the request was written and before any
    byte of an answer: a reused keep-alive connection the backend was closing, or a backend
    that died. Nothing reached the client, so a pool may ask another target (failover.py)."""


class UpstreamTooLarge(UpstreamError):
    """The body is larger than the caller's limit: the connection was dropped unread."""


class ResponseHead:
    """What every transport's response answers alike (this client's, upstream/memory.py's):
    a header's value, and whether the whole body has arrived."""

    __slots__ = ()
    headers: list[tuple[bytes, bytes]]
    _done: bool

    @property
    def complete(self) -> bool:
        """The whole body has arrived (some of it may still be buffered unread)."""
        return self._done

    def header(self, name: bytes) -> bytes | None:
        for key, value in self.headers:
            if key == name:
                return value
        return None
