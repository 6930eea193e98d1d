"""How long a slow client holds a connection of a real gateway at the default limits
(server.head_timeout_s, body_timeout_s, min_body_rate, body_rate_grace_s; http/limits.py),
over loopback, against the mock backend: each attacker trickles one byte every 3 s, and
the time from its first byte until the gateway closes the connection is measured.

    python bench/slow_clients.py [--out bench/results/2026-12-03/edge/slow_clients.json]

Takes about 15 s (the cases run side by side).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support import base_config, gateway_in_process, mock_backend  # noqa: E402

BODY_HEAD = (b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
             b"%scontent-length: 100000\r\n\r\n")


async def held_for(port: int, first: bytes, then: bytes, every: float) -> tuple[float, str]:
    """Seconds from the first byte until the connection closes, and the answer's status line."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    started = time.monotonic()
    writer.write(first)

    async def trickle() -> None:
        try:
            for i in range(len(then)):
                await asyncio.sleep(every)
                writer.write(then[i:i + 1])
                await writer.drain()
        except (ConnectionError, OSError):
            pass

    task = asyncio.ensure_future(trickle())
    got = b""
    try:
        while chunk := await asyncio.wait_for(reader.read(65536), 120):
            got += chunk
    except (ConnectionError, OSError):
        pass
    finally:
        task.cancel()
        writer.close()
    return round(time.monotonic() - started, 2), got.split(b"\r\n", 1)[0].decode() or "closed, no answer"


async def main(out: Path | None) -> None:
    async with mock_backend() as mock:
        async with gateway_in_process(base_config(mock.url)) as gw:
            port = int(gw.url.rsplit(":", 1)[1])
            key = b"authorization: Bearer " + gw.key.encode() + b"\r\n"
            cases = {
                "request head, a byte every 3 s": held_for(port, b"P", b"OST /v1/chat/completions HTTP/1.1\r\n",
                                                           3.0),
                "no bytes at all": held_for(port, b"", b"", 3.0),
                "body without credentials, a byte every 3 s": held_for(port, BODY_HEAD % b"" + b"{", b" " * 100, 3.0),
                "keyed body, a byte every 3 s": held_for(port, BODY_HEAD % key + b"{", b" " * 100, 3.0),
                "keyed body, 100 bytes a second": held_for(port, BODY_HEAD % key + b"{", b" " * 10000, 0.01),
            }
            results = dict(zip(cases, await asyncio.gather(*cases.values())))
    limits = gw.gateway.config.server
    report = {"limits": {name: getattr(limits, name) for name in
                         ("head_timeout_s", "body_timeout_s", "min_body_rate", "body_rate_grace_s", "keep_alive_s")},
              "held_s": {name: {"seconds": s, "answer": a} for name, (s, a) in results.items()}}
    print(json.dumps(report, indent=2))
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path)
    asyncio.run(main(parser.parse_args().out))
