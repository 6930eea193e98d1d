"""Instructions per request in the gateway's HTTP server alone (http/server.py, cycle.py),
counted by callgrind: requests fed to one connection through a stub transport, answered
by an app that reads the body and answers at once, at two request counts, the difference
divided by the requests between them (start-up cancels out).

    python bench/http_instructions.py [--low 2000] [--high 12000]
    PYTHONPATH=/tmp/old/src python bench/http_instructions.py   # another version's server

What bench/instructions.py leaves out (it calls the app without a server): the head
parsing callbacks, the head checks, the request cycle and the write batching. No sockets,
so no syscalls; the kernel's share is not in it either way.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile

BODY = b'{"model":"bench-chat","messages":[{"role":"user","content":"Say hello."}],"max_tokens":16}'
REQUEST = (b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:8080\r\nuser-agent: OpenAI/Python 1.54.0\r\n"
           b"accept: application/json\r\ncontent-type: application/json\r\n"
           b"authorization: Bearer tw_0123456789abcdef_abcdefghijklmnopqrstuvwxyz0123456789ABCDEF\r\n"
           b"x-stainless-lang: python\r\ncontent-length: %d\r\n\r\n%s" % (len(BODY), BODY))
ANSWER = b'{"id":"x","object":"chat.completion","choices":[]}'


class StubTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = 0

    def write(self, data) -> None:
        self.written += 1

    def get_extra_info(self, name, default=None):
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 8080)}.get(name, default)

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        pass


async def serve(requests: int) -> int:
    from tokenward.http.responses import send_json
    from tokenward.http.server import HttpConnection
    from tokenward.http.state import ServerState

    async def app(scope, receive, send) -> None:
        await receive()
        await send_json(send, 200, ANSWER, b"req_1")

    state = ServerState(app, asyncio.get_running_loop(), 30.0)
    conn = HttpConnection(state)
    transport = StubTransport()
    conn.connection_made(transport)
    for _ in range(requests):
        conn.data_received(REQUEST)
        while conn.cycle is not None or conn.busy:
            await asyncio.sleep(0)
        await asyncio.sleep(0)   # the write batch's flush
    return transport.written


def _count(requests: int) -> int:
    with tempfile.TemporaryDirectory(prefix="tokenward-cg-") as tmp:
        done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/cg.%p.out",
                               sys.executable, __file__, "--run", str(requests)],
                              capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"},
                              timeout=1800)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or not found:
        raise SystemExit(f"callgrind run failed ({done.returncode}):\n{done.stdout[-1500:]}\n{done.stderr[-1500:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--low", type=int, default=2000)
    parser.add_argument("--high", type=int, default=12000)
    parser.add_argument("--run", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run is not None:
        import uvloop   # as ``tokenward serve`` runs

        written = uvloop.run(serve(args.run))
        assert written == args.run, (written, args.run)
        return
    low, high = _count(args.low), _count(args.high)
    print(f"http server: {(high - low) / (args.high - args.low):,.0f} instructions per request "
          f"({low:,} at {args.low}, {high:,} at {args.high} requests)")


if __name__ == "__main__":
    main()
