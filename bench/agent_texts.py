"""Texts for the agents' workloads (issue 43), made the same way wherever they are used.

The text is Python's own standard library sources, read from this interpreter's ``Lib``
directory in a fixed order (sorted paths), kept ASCII (other characters dropped, as the
issue's rig did), and cut into pieces: 4 KiB history messages, 4 KB new messages, 64 KiB
new messages. Nobody here wrote that text and nothing is tuned on it.

    stdlib_text(n_bytes)          the first n_bytes of the stdlib, ASCII
    pieces(size, count, offset)   count consecutive pieces of size characters
"""

from __future__ import annotations

import sysconfig
from functools import lru_cache
from pathlib import Path

KIB = 1024


@lru_cache(maxsize=None)
def _stdlib_ascii(limit: int) -> str:
    root = Path(sysconfig.get_paths()["stdlib"])
    parts: list[str] = []
    size = 0
    for path in sorted(root.rglob("*.py")):
        if "site-packages" in path.parts or "test" in path.parts:
            continue
        try:
            raw = path.read_bytes()
        except OSError:
            continue
        text = raw.decode("ascii", "ignore")
        parts.append(text)
        size += len(text)
        if size >= limit:
            break
    return "".join(parts)[:limit]


def stdlib_text(n_bytes: int) -> str:
    """The first ``n_bytes`` characters (ASCII: bytes) of the stdlib's sources."""
    return _stdlib_ascii(max(n_bytes, 64 * KIB))[:n_bytes]


def pieces(size: int, count: int, offset: int = 0) -> list[str]:
    """``count`` consecutive pieces of ``size`` characters, starting ``offset`` pieces in;
    the text wraps around when it runs out."""
    pool = stdlib_text(max(8 * 2**20, size * 4))
    out = []
    for i in range(offset, offset + count):
        start = (i * size) % (len(pool) - size)
        out.append(pool[start:start + size])
    return out


# The pools bench/post.lua reads (BENCH_AGENT_POOL): pieces of the sizes the issue names,
# JSON-escaped, one a line. 2,053 history pieces (a prime: session s's message m is piece
# (16 s + m) mod 2,053, so sessions do not line up on the same pieces), 509 new messages,
# 131 new 64 KiB messages (8 MiB of text each).
POOLS = {"history_4096.txt": (4096, 2053), "new_4000.txt": (4000, 509), "new_65536.txt": (65536, 131)}


def write_pools(directory: Path) -> Path:
    import json

    directory.mkdir(parents=True, exist_ok=True)
    for offset, (name, (size, count)) in enumerate(POOLS.items()):
        with open(directory / name, "w") as out:
            for piece in pieces(size, count, offset * 7919):
                out.write(json.dumps(piece)[1:-1] + "\n")
    return directory
