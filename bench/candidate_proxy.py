"""A minimal pass-through proxy, one per server/client candidate (see candidates.py).

    python bench/candidate_proxy.py --server uvicorn|aiohttp --client aiohttp|httpx|lean \
        --upstream http://127.0.0.1:PORT     # prints "proxy listening on http://127.0.0.1:PORT"

Each proxy does the least a gateway must: read the request body, POST it upstream on a
pooled keep-alive connection, read the whole answer, send it back with its status and
content type. Nothing else, so the numbers compare the server and the client alone.
With the lean client, a body with ``"stream":true`` is relayed chunk by chunk (one ASGI
send per upstream read): the floor for overhead.py's streaming benchmark.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys

UPSTREAM_HEADERS = {"content-type": "application/json"}
POOL = 2048  # 1,000 concurrent streams hold 1,000 upstream connections


class AiohttpClient:
    def __init__(self, base: str) -> None:
        import aiohttp

        self.base = base
        self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=POOL))

    async def post(self, path: str, body: bytes) -> tuple[int, bytes, bytes]:
        async with self.session.post(self.base + path, data=body, headers=UPSTREAM_HEADERS) as resp:
            data = await resp.read()
            return resp.status, resp.headers.get("content-type", "application/json").encode(), data


class HttpxClient:
    def __init__(self, base: str) -> None:
        import httpx

        self.base = base
        self.client = httpx.AsyncClient(limits=httpx.Limits(max_connections=POOL, max_keepalive_connections=POOL),
                                        timeout=30.0)

    async def post(self, path: str, body: bytes) -> tuple[int, bytes, bytes]:
        resp = await self.client.post(self.base + path, content=body, headers=UPSTREAM_HEADERS)
        return resp.status_code, resp.headers.get("content-type", "application/json").encode(), resp.content


class LeanClient:
    """The project's own client (tokenward.upstream.client.UpstreamPool)."""

    def __init__(self, base: str) -> None:
        from tokenward.upstream.client import UpstreamPool

        self.pool = UpstreamPool(base, max_connections=POOL)
        self.headers = [(b"content-type", b"application/json")]

    async def post(self, path: str, body: bytes) -> tuple[int, bytes, bytes]:
        resp = await self.pool.request("POST", path, self.headers, body)
        data = await resp.read()
        return resp.status, resp.header(b"content-type") or b"application/json", data

    async def relay_stream(self, path: str, body: bytes, send) -> None:
        """The least a streaming proxy does: each upstream read becomes one ASGI send."""
        resp = await self.pool.request("POST", path, self.headers, body)
        try:
            await send({"type": "http.response.start", "status": resp.status,
                        "headers": [(b"content-type", resp.header(b"content-type") or b"text/event-stream")]})
            while (chunk := await resp.next_chunk()) is not None:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            resp.abort()


class NoClient:
    """No upstream at all: the server alone answering a fixed body (calibration)."""

    def __init__(self, base: str) -> None:
        from backend import CHAT_BODY

        self.body = CHAT_BODY

    async def post(self, path: str, body: bytes) -> tuple[int, bytes, bytes]:
        return 200, b"application/json", self.body


def lean_budget_client(base: str):
    """The lean client plus counting, a reservation, a settle and a record (lean_budget.py)."""
    from lean_budget import LeanBudgetClient

    return LeanBudgetClient(base)


CLIENTS = {"aiohttp": AiohttpClient, "httpx": HttpxClient, "lean": LeanClient, "none": NoClient,
           "lean-budget": lean_budget_client}


def asgi_app(make_client):
    holder: list = []

    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    holder.append(make_client())  # inside the running loop
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        client = holder[0]
        if b'"stream":true' in body and hasattr(client, "relay_stream"):
            await client.relay_stream(scope["path"], body, send)
            return
        status, ctype, data = await client.post(scope["path"], body)
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", ctype), (b"content-length", str(len(data)).encode())]})
        await send({"type": "http.response.body", "body": data})

    return app


def listening_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)
    print(f"proxy listening on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    return sock


def run_uvicorn(make_client) -> None:
    import uvicorn

    sock = listening_socket()
    config = uvicorn.Config(asgi_app(make_client), loop="uvloop", http="httptools", lifespan="on",
                            access_log=False, log_level="warning", server_header=False, date_header=False)
    uvicorn.Server(config).run(sockets=[sock])


def run_tokenward(make_client) -> None:
    """The gateway's own HTTP server (tokenward.http.serving) with the same ASGI app."""
    from tokenward.http import serving

    sock = listening_socket()
    serving.run(asgi_app(make_client), [sock])


def run_aiohttp_web(make_client) -> None:
    import uvloop
    from aiohttp import web

    async def handler(request: web.Request) -> web.Response:
        body = await request.read()
        status, ctype, data = await request.app["client"].post(request.path, body)
        return web.Response(status=status, body=data, headers={"content-type": ctype.decode()})

    async def startup(app: web.Application) -> None:
        app["client"] = make_client()

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    app.on_startup.append(startup)
    sock = listening_socket()
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    web.run_app(app, sock=sock, print=None, access_log=None, handle_signals=True)


SERVERS = {"uvicorn": run_uvicorn, "aiohttp": run_aiohttp_web, "tokenward": run_tokenward}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", choices=sorted(SERVERS), required=True)
    parser.add_argument("--client", choices=sorted(CLIENTS), required=True)
    parser.add_argument("--upstream", required=True, help="backend origin, e.g. http://127.0.0.1:PORT")
    args = parser.parse_args()
    client_class = CLIENTS[args.client]

    def make_client():
        return client_class(args.upstream)

    try:
        SERVERS[args.server](make_client)
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
