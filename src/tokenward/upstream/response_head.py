"""What every upstream transport's response shares (the client's, upstream/_conn.py; the
in-process one, upstream/memory.py): the errors a request can end in, and the head's
lookups (a header's value, whether the whole body has arrived)."""

from __future__ import annotations

from typing import Protocol


class ExtraResponseBytes(Exception):
    """Raised from a parser callback (upstream/_conn.py) to stop at bytes following a
    complete response: defined here, since mypyc compiles that module (tokenward/compiled.py)."""


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


class Response(Protocol):
    """A backend's response as the forwarder reads it, whichever transport brought it
    (``UpstreamResponse``, ``MemoryResponse``, a bench's stub): what the forward step, the
    stream relay and the health probe call, and nothing else."""

    status: int

    def header(self, name: bytes) -> bytes | None: ...

    async def read(self, timeout: float | None = None, limit: int | None = None) -> bytes: ...

    async def next_chunk(self, timeout: float | None = None) -> bytes | None: ...

    def abort(self) -> None: ...


class Transport(Protocol):
    """How a target's requests reach its backend: ``UpstreamPool`` (HTTP/1.1 over TCP), or
    a transport the assembly was given (``MemoryTransport``). Typed by what it does, not by
    class: a module mypyc compiles checks a class-typed attribute at run time."""

    async def request(self, method: str, path: str, headers: list[tuple[bytes, bytes]], body: bytes,
                      *, timeout: float | None = None) -> Response: ...

    @property
    def stats(self) -> dict[str, int]: ...

    async def aclose(self) -> None: ...
