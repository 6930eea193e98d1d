"""Small ASGI apps and raw-socket readers for the server tests."""

from __future__ import annotations

import asyncio
import contextlib
import socket

from tokenward.http.serving import HttpServer

def with_lifespan(handler):
    """Wrap an HTTP-only handler so start()/stop() get the lifespan answers they wait for."""

    async def app(scope, receive, send):
        if scope["type"] != "lifespan":
            return await handler(scope, receive, send)
        while True:
            message = await receive()
            kind = message["type"].rsplit(".", 1)[1]
            await send({"type": f"lifespan.{kind}.complete"})
            if kind == "shutdown":
                return

    return app


def listening_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


@contextlib.asynccontextmanager
async def serve(handler, **kwargs):
    sock = listening_socket()
    port = sock.getsockname()[1]
    server = HttpServer(with_lifespan(handler), **{"graceful_s": 5.0, **kwargs})
    await server.start([sock])
    try:
        yield server, port
    finally:
        await server.stop(graceful=False)


@contextlib.asynccontextmanager
async def connection(port: int, rcvbuf: int | None = None):
    sock = None
    if rcvbuf is not None:
        # A small receive window (set before connect) makes the server's writes back up.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        reader, writer = await asyncio.open_connection(sock=sock, limit=1 << 20)
    else:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        yield reader, writer
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """One request off a client's connection, as a raw backend reads it: (head, body), the body
    framed by content-length (the gateway's upstream client sends no chunked bodies)."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    return head, await reader.readexactly(length)


async def read_head(reader):
    raw = await reader.readuntil(b"\r\n\r\n")
    lines = raw.decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    return int(lines[0].split(" ")[1]), headers


async def read_chunked(reader) -> bytes:
    parts = []
    while True:
        size = int((await reader.readuntil(b"\r\n"))[:-2].split(b";")[0], 16)
        if size == 0:
            assert await reader.readexactly(2) == b"\r\n"
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        assert await reader.readexactly(2) == b"\r\n"


async def read_response(reader, head_only: bool = False):
    status, headers = await read_head(reader)
    if head_only:
        body = b""
    elif "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding") == "chunked":
        body = await read_chunked(reader)
    else:
        body = await reader.read()  # delimited by the connection's end
    return status, headers, body


async def at_eof(reader, timeout: float = 2.0) -> bool:
    return await asyncio.wait_for(reader.read(), timeout) == b""


async def respond(send, body: bytes, status: int = 200, headers=()) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-length", b"%d" % len(body)), *headers]})
    await send({"type": "http.response.body", "body": body})


async def read_body(receive) -> tuple[bytes, int]:
    parts, messages = [], 0
    while True:
        message = await receive()
        assert message["type"] == "http.request"
        parts.append(message["body"])
        messages += 1
        if not message.get("more_body"):
            return b"".join(parts), messages


async def echo(scope, receive, send):
    body, _ = await read_body(receive)
    await respond(send, scope["method"].encode() + b" " + scope["path"].encode() + b" " + body)
