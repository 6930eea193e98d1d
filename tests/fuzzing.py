"""Seeded byte mutations for the fuzz tests: deletions, inserted tokens that matter to HTTP
and JSON framing, replaced bytes and duplicated runs."""

from __future__ import annotations

import random

TOKENS = [b"\r\n", b"\n", b"\r", b" ", b":", b"\x00", b"\xff", b"%", b"0", b"-1", b"99999999999999999999",
          b"chunked", b"content-length: 3\r\n", b"transfer-encoding: chunked\r\n", b"HTTP/1.1", b"\t", b"{",
          b"}", b'"', b"GET ", b"POST /v1/chat/completions HTTP/1.1\r\n", b"expect: 100-continue\r\n"]


def mutate(rng: random.Random, raw: bytes) -> bytes:
    out = bytearray(raw)
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(out) + 1)
        op = rng.random()
        if op < 0.3 and len(out) > 1:
            del out[at:at + rng.randint(1, 8)]
        elif op < 0.6:
            out[at:at] = rng.choice(TOKENS)
        elif op < 0.8:
            out[min(at, len(out) - 1)] = rng.randrange(256)
        else:
            start = rng.randrange(len(out))
            out[at:at] = out[start:start + rng.randint(1, 40)]
    return bytes(out)
