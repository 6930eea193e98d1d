"""A programmable backend over loopback that answers whatever a test tells it to: any usage
(negative, zero, 10^12, missing, repeated), a body or an SSE stream of any size, broken
framing. It speaks real HTTP/1.1 on a port the OS picks; the gateway reaches it as it
would reach vLLM.

A test sets ``backend.answer`` to a function of the decoded request body that returns one
of the answers below; ``requests`` counts the requests for work, ``sent`` the body bytes
written to the gateway (until it hung up).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, AsyncIterator, Callable, Iterable

import orjson

_PIECE = 64 * 1024


def completion(usage: Any = None, content: str = "hi", *, with_usage: bool = True, extra: bytes = b"") -> bytes:
    """A chat completion body; ``usage`` goes in as given (any JSON value) when ``with_usage``."""
    body: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "small-chat",
                            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                         "finish_reason": "stop"}]}
    if with_usage:
        body["usage"] = usage
    raw = orjson.dumps(body)
    return raw[:-1] + extra + b"}" if extra else raw


def chunk(content: str | None = None, *, finish: str | None = None, usage: Any = None,
          choices: bool = True) -> bytes:
    """One ``data:`` event of a chat stream."""
    event: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                             "model": "small-chat", "choices": []}
    if choices:
        delta = {} if content is None else {"content": content}
        event["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    if usage is not None:
        event["usage"] = usage
    return b"data: " + orjson.dumps(event) + b"\n\n"


def usage(prompt: Any, completion_tokens: Any) -> dict:
    return {"prompt_tokens": prompt, "completion_tokens": completion_tokens}


class Whole:
    """A body with a content-length (``length`` overrides the declared one: a huge body is
    declared whole and then written forever, as a lying server would)."""

    def __init__(self, body: bytes = b"", status: int = 200, length: int | None = None,
                 chunked: bool = False) -> None:
        self.body, self.status, self.length, self.chunked = body, status, length, chunked


class Stream:
    """A chunked text/event-stream: each item of ``events`` is written as one HTTP chunk."""

    def __init__(self, events: Iterable[bytes]) -> None:
        self.events = events


def endless(event: bytes, total: int) -> Iterable[bytes]:
    """``event`` repeated, in pieces of about 64 KiB, until ``total`` bytes."""
    piece = event * max(1, _PIECE // len(event))
    for _ in range(max(1, total // len(piece))):
        yield piece


class LyingBackend:
    def __init__(self) -> None:
        self.answer: Callable[[dict], Whole | Stream] = lambda body: Whole(completion(usage(3, 1)))
        self.requests = 0
        self.sent = 0
        self.port = 0
        self._server: asyncio.AbstractServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.split(b"\r\n")
                length = next((int(line.split(b":", 1)[1]) for line in lines
                               if line.lower().startswith(b"content-length:")), 0)
                raw = await reader.readexactly(length)
                if lines[0].startswith(b"GET "):     # a readiness probe (GET /models)
                    await self._write_whole(writer, Whole(b'{"object": "list", "data": []}'))
                    continue
                self.requests += 1
                answer = self.answer(orjson.loads(raw))
                if isinstance(answer, Stream):
                    await self._write_stream(writer, answer)
                else:
                    await self._write_whole(writer, answer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _write_whole(self, writer: asyncio.StreamWriter, answer: Whole) -> None:
        framing = (b"transfer-encoding: chunked" if answer.chunked else
                   b"content-length: %d" % (len(answer.body) if answer.length is None else answer.length))
        writer.write(b"HTTP/1.1 %d OK\r\ncontent-type: application/json\r\n%s\r\n\r\n" % (answer.status, framing))
        if answer.length is None and not answer.chunked:
            writer.write(answer.body)
            self.sent += len(answer.body)
            await writer.drain()
            return
        # a huge body: pieces until the declared length (or forever, chunked), or until the
        # gateway hangs up
        total = answer.length if answer.length is not None else 1 << 62
        piece = (answer.body or b" ") * max(1, _PIECE // max(len(answer.body), 1))
        written = 0
        while written < total:
            data = piece[:total - written]
            writer.write(b"%x\r\n%s\r\n" % (len(data), data) if answer.chunked else data)
            written += len(data)
            self.sent += len(data)
            await writer.drain()
        if answer.chunked:
            writer.write(b"0\r\n\r\n")
            await writer.drain()

    async def _write_stream(self, writer: asyncio.StreamWriter, answer: Stream) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        for data in answer.events:
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.sent += len(data)
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()


@contextlib.asynccontextmanager
async def lying_backend() -> AsyncIterator[LyingBackend]:
    backend = LyingBackend()
    server = await asyncio.start_server(backend._serve, "127.0.0.1", 0)
    backend.port = server.sockets[0].getsockname()[1]
    try:
        yield backend
    finally:
        server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 2)
