"""The Redis budget store: every replica shares one Redis (or Valkey) for budgets and leases.

The two scripts in ``lua/`` are registered once (their SHA1 is computed locally) and
called with EVALSHA; a NOSCRIPT answer (a restarted or failed-over server) loads them and
retries the batch, which is safe because reserve and settle are both idempotent by
reservation id.

A batch of calls is one pipelined write and one read of the replies: one round trip,
through one of the two transports of ``resp.py``. The parts of a command that do not
change per request (a layout's keys and its checks' parameters) are encoded once and
kept on the layout. Every failure is raised as ``StoreUnavailable``.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from typing import Sequence

from .policy import Outcome
from .resp import RedisPyConnections, RespClient, ScriptMissing, _bulk, pack
from .store import ALREADY_RESERVED, LeaseRenewal, ReserveCall, SettleCall


def _load(name: str) -> bytes:
    return resources.files("tokenward.budget").joinpath("lua").joinpath(name).read_bytes()


class Script:
    __slots__ = ("source", "sha", "head")

    def __init__(self, name: str) -> None:
        # Redis scripts cannot import: the shared helpers are prepended to each one.
        self.source = _load("bucket.lua") + _load(name)
        self.sha = hashlib.sha1(self.source).hexdigest().encode()
        self.head = b"$7\r\nEVALSHA\r\n$40\r\n" + self.sha + b"\r\n"


RESERVE = Script("reserve.lua")
SETTLE = Script("settle.lua")


class _ReserveWire:
    """What a layout's calls share, encoded once: each command's head up to the record key,
    the record key's prefix, the keys after the record and the checks' unchanging tail of ARGV."""

    __slots__ = ("reserve_head", "settle_head", "record_prefix", "keys", "tail", "n")

    def __init__(self, call: ReserveCall) -> None:
        layout = call.layout
        n = len(layout.checks)
        self.n = b"%d" % n
        numkeys = _bulk(2 + n)
        self.reserve_head = b"*%d\r\n" % (3 + (2 + n) + 4 + n + 5 * n) + RESERVE.head + numkeys
        self.settle_head = b"*%d\r\n" % (3 + (2 + n) + 5) + SETTLE.head + numkeys
        self.record_prefix = layout.record_key("").encode()
        self.keys = _bulk(layout.leases_key) + b"".join(map(_bulk, layout.keys))
        self.tail = b"".join(_bulk(v) for c in layout.checks for v in (c.kind, c.unit, c.p1, c.p2, c.enforce))


def _ascii_bulks(values: tuple) -> bytes:
    """Several bulk strings at once; only for ASCII values (numbers, modes, reservation ids)."""
    return "".join([f"${len(v)}\r\n{v}\r\n" for v in map(str, values)]).encode()


def _record_bulk(wire: _ReserveWire, rid: bytes) -> bytes:
    return b"$%d\r\n%b%b\r\n" % (len(wire.record_prefix) + len(rid), wire.record_prefix, rid)


def _pack_reserve(call: ReserveCall) -> bytes:
    layout = call.layout
    wire = layout.wire
    if wire is None:
        wire = layout.wire = _ReserveWire(call)
    rid = call.reservation_id.encode()
    now = b"%d" % call.now_ms
    until = b"%d" % call.lease_until_ms
    head = b"$%d\r\n%b\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n" % (
        len(now), now, len(rid), rid, len(until), until, len(wire.n), wire.n)
    return b"".join((wire.reserve_head, _record_bulk(wire, rid), wire.keys, head,
                     _ascii_bulks(call.amounts), wire.tail))


def _pack_settle(call: SettleCall) -> bytes:
    layout = call.layout
    args = _ascii_bulks((call.now_ms, call.tokens, call.cost, call.mode, call.reservation_id))
    if layout is not None and isinstance(layout.wire, _ReserveWire):
        wire = layout.wire
        return b"".join((wire.settle_head, _bulk(call.record_key), wire.keys, args))
    keys = _bulk(call.leases_key) + b"".join(map(_bulk, call.keys))
    return b"".join((b"*%d\r\n" % (3 + 2 + len(call.keys) + 5), SETTLE.head, _bulk(2 + len(call.keys)),
                     _bulk(call.record_key), keys, args))


def _outcome(reply: list) -> Outcome:
    status = reply[0]
    if status == 2:
        return ALREADY_RESERVED
    shadow = tuple(int(i) - 1 for i in reply[3].split(b",")) if reply[3] else ()
    return Outcome(status == 1, reply[1] - 1, reply[2], shadow, tuple(reply[4:]))


class RedisStore:
    name = "redis"

    def __init__(self, url: str, timeout_s: float, client: str = "resp") -> None:
        if client == "resp" and not url.startswith("rediss://"):
            self._transport: RespClient | RedisPyConnections = RespClient(url, timeout_s)
        else:
            self._transport = RedisPyConnections(url, timeout_s)
        self.timeout_s = timeout_s
        self.round_trips = 0

    async def _run(self, payload: bytes, replies: int) -> list:
        self.round_trips += 1
        try:
            return await self._transport.exchange(payload, replies)
        except ScriptMissing:
            return await self._load_scripts_and_retry(payload, replies)

    async def _load_scripts_and_retry(self, payload: bytes, replies: int) -> list:
        self.round_trips += 2
        await self._transport.exchange(pack(b"SCRIPT", b"LOAD", RESERVE.source)
                                       + pack(b"SCRIPT", b"LOAD", SETTLE.source), 2)
        return await self._transport.exchange(payload, replies)

    # reserve and settle inline _run: one coroutine less per call on the hot path
    async def reserve(self, calls: Sequence[ReserveCall]) -> list[Outcome]:
        if not calls:
            return []
        payload = b"".join(map(_pack_reserve, calls)) if len(calls) > 1 else _pack_reserve(calls[0])
        self.round_trips += 1
        try:
            replies = await self._transport.exchange(payload, len(calls))
        except ScriptMissing:
            replies = await self._load_scripts_and_retry(payload, len(calls))
        return [_outcome(reply) for reply in replies]

    async def settle(self, calls: Sequence[SettleCall]) -> list[int]:
        if not calls:
            return []
        payload = b"".join(map(_pack_settle, calls)) if len(calls) > 1 else _pack_settle(calls[0])
        self.round_trips += 1
        try:
            return await self._transport.exchange(payload, len(calls))
        except ScriptMissing:
            return await self._load_scripts_and_retry(payload, len(calls))

    async def renew(self, renewals: Sequence[LeaseRenewal]) -> None:
        commands = []
        for r in renewals:
            if r.reservation_ids:
                args: list[object] = [b"ZADD", r.leases_key, b"XX"]
                for rid in r.reservation_ids:
                    args += (r.until_ms, rid)
                commands.append(pack(*args))
        if commands:
            await self._run(b"".join(commands), len(commands))

    async def expired(self, leases_keys: Sequence[str], now_ms: int, limit: int) -> list[list[str]]:
        if not leases_keys:
            return []
        commands = b"".join(pack(b"ZRANGEBYSCORE", key, b"-inf", b"(%d" % now_ms, b"LIMIT", 0, limit)
                            for key in leases_keys)
        replies = await self._run(commands, len(leases_keys))
        return [[rid.decode() for rid in reply] for reply in replies]

    async def record_keys(self, record_keys: Sequence[str]) -> list[list[str] | None]:
        if not record_keys:
            return []
        replies = await self._run(b"".join(pack(b"HGET", key, b"k") for key in record_keys), len(record_keys))
        return [reply.decode().split(" ") if reply is not None else None for reply in replies]

    async def value(self, key: str) -> object:
        # Two reads, not atomic: a key settled in between reads as gone.
        [kind] = await self._run(pack(b"TYPE", key), 1)
        if kind == b"hash":
            level, ts = (await self._run(pack(b"HMGET", key, b"l", b"t"), 1))[0]
            return None if level is None else (int(level), int(ts))
        if kind == b"string":
            [raw] = await self._run(pack(b"GET", key), 1)
            if raw is None:
                return None
            if b" " in raw:  # a bucket: "level ts"
                level, ts = raw.split(b" ")
                return int(level), int(ts)
            return int(raw)
        return None

    async def open_reservations(self, leases_key: str) -> int:
        return (await self._run(pack(b"ZCARD", leases_key), 1))[0]

    async def close(self) -> None:
        await self._transport.close()
