"""One decision record per request, as a JSON line.

Records are encoded on the request path but written in batches: a buffer flushed every
100 ms (or when it passes 64 KiB), so a busy gateway does one write per batch rather than
one per request. Records never hold a key, a prompt, a completion or a raw path (the
route template instead, and for a path that matches no route its shape: observe/routes.py).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import IO, Any

import msgspec

from ..pipeline.context import RequestContext
from .decision_record import DecisionRecord
from .routes import OTHER, path_shape


def build_record(ctx: RequestContext, now_ns: int, route: str) -> DecisionRecord:
    """``route``: the request's route label, the template, never the raw path (observe/routes.py)."""
    principal = ctx.principal
    # Positional, in field order: this runs once per request.
    return DecisionRecord(
        time.time(), ctx.request_id, ctx.method, route, ctx.lifecycle.state.text, ctx.status,
        ctx.deciding_stage, ctx.reason, ctx.model, ctx.stream,
        principal.tenant if principal is not None else None,
        principal.key_id if principal is not None else None,
        ctx.upstream_status,
        ctx.usage if ctx.upstream_status is not None else None,
        {name: ns / 1000 for name, ns in ctx.timings},
        (now_ns - ctx.started_ns) / 1000,
        ctx.notes,
        ctx.answered_by,
        ctx.screening.record if ctx.screening is not None else None,
        path_shape(ctx.path) if route == OTHER else None,
    )


class DecisionLog:
    FLUSH_BYTES = 65536
    FLUSH_S = 0.1

    def __init__(self, target: str) -> None:
        self._stream: IO[bytes] | None
        self._owned = False
        if target == "off":
            self._stream = None
        elif target == "stdout":
            self._stream = sys.stdout.buffer
        elif target == "stderr":
            self._stream = sys.stderr.buffer
        else:
            self._stream = open(target, "ab")  # noqa: SIM115 - closed in close()
            self._owned = True
        self._buf = bytearray()
        self._timer: asyncio.TimerHandle | None = None
        self._encode = msgspec.json.Encoder().encode_into
        self.written = 0

    @property
    def enabled(self) -> bool:
        return self._stream is not None

    def write(self, record: DecisionRecord) -> None:
        if self._stream is None:
            return
        buf = self._buf
        self._encode(record, buf, len(buf))
        buf += b"\n"
        self.written += 1
        if len(buf) >= self.FLUSH_BYTES:
            self.flush()
        elif self._timer is None:
            try:
                self._timer = asyncio.get_running_loop().call_later(self.FLUSH_S, self.flush)
            except RuntimeError:
                self.flush()

    def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._stream is None or not self._buf:
            return
        data = bytes(self._buf)
        self._buf.clear()
        try:
            self._stream.write(data)
            self._stream.flush()
        except (OSError, ValueError):
            pass  # a full disk must not fail requests; records are best effort

    def close(self) -> None:
        self.flush()
        if self._owned and self._stream is not None:
            self._stream.close()
        self._stream = None


def open_decision_log(target: str | bool) -> DecisionLog:
    if isinstance(target, bool):
        target = "stdout" if target else "off"
    if target not in ("off", "stdout", "stderr"):
        os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
    return DecisionLog(target)
