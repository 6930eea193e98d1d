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

import struct
from typing import Sequence

from . import policy
from .policy import Check, Outcome
from .cluster import ClusterRouter, is_cluster_reply
from .redis_jobs import RedisJobs, decode_job
from .resp import RedisPyConnections, Replies, RespClient, SingleFlight, _bulk, pack
from .scripts import RESERVE, SCRIPTS, SETTLE, SWEEP
from .store import ALREADY_RESERVED, Layout, LeaseRenewal, ReserveCall, ScriptMissing, SettleCall


def _script_loads() -> bytes:
    """SCRIPT LOAD of every script: ``len(SCRIPTS)`` replies."""
    return b"".join(pack(b"SCRIPT", b"LOAD", script.source) for script in SCRIPTS)

_KIND = {policy.BUCKET: 1, policy.SOFT: 2, policy.GAUGE: 3, policy.SPEND: 4, policy.JOB: 5, policy.ANCESTOR: 6}
_UNIT = {policy.TOKENS: 1, policy.COST: 2, policy.REQUEST: 3, policy.SLOT: 4}
_pack_amounts = [struct.Struct("<%dd" % n).pack for n in range(33)]


def field_of(namespace: str, check: Check) -> str:
    """A check's field in its namespace's hash: the key after the namespace; a spend key
    without its period (one field per period kind, the period stored with the value)."""
    name = check.key[len(namespace) + 1:]
    return name.rsplit(":", 1)[0] if check.kind == policy.SPEND else name


def namespace_of(key: str) -> str:
    """``tw:{t:acme}:b:tokens`` -> ``tw:{t:acme}`` (the hash tag closes the namespace)."""
    return key[: key.index("}") + 1]


class _ReserveWire:
    """What a layout's calls share, encoded once: each command's head, the keys after the
    record key, the packed checks and the fields."""

    __slots__ = ("reserve_head", "reserve_tail", "settle_head", "settle_keys", "fields", "pack_amounts")

    def __init__(self, layout: Layout) -> None:
        n = len(layout.checks)
        if n >= len(_pack_amounts):
            raise ValueError(f"at most {len(_pack_amounts) - 1} checks per namespace")
        spec = struct.pack("<%dd" % (5 * n), *(v for c in layout.checks
                                               for v in (_KIND[c.kind], _UNIT[c.unit], c.p1, c.p2, c.enforce)))
        state = _bulk(layout.namespace)
        leases = _bulk(layout.leases_key)
        old_keys = b"".join(map(_bulk, layout.keys))
        fields = [field_of(layout.namespace, c) for c in layout.checks]
        if len(set(fields)) < n:
            raise ValueError(f"two checks of {layout.namespace} share a field: {fields}")
        self.fields = b"".join(map(_bulk, fields))
        self.reserve_head = (b"*%d\r\n" % (3 + (2 + n) + 5 + n) + RESERVE.head + _bulk(2 + n)
                             + state + leases + old_keys)
        self.reserve_tail = _bulk(spec)
        self.settle_head = b"*%d\r\n" % (3 + (3 + n) + 5 + n) + SETTLE.head + _bulk(3 + n) + state + leases
        self.settle_keys = old_keys
        self.pack_amounts = _pack_amounts[n]


def _reserve_args(now_ms: int, rid: str, until_ms: int) -> bytes:
    """ARGV 1-3 of reserve.lua as bulk strings (ASCII: numbers and a hex id), one f-string."""
    now, until = str(now_ms), str(until_ms)
    return f"${len(now)}\r\n{now}\r\n${len(rid)}\r\n{rid}\r\n${len(until)}\r\n{until}\r\n".encode()


def _settle_args(call: SettleCall) -> bytes:
    """ARGV 1-5 of settle.lua as bulk strings (ASCII: numbers, a mode letter, a hex id)."""
    now, tokens, cost, mode, rid = str(call.now_ms), str(call.tokens), str(call.cost), call.mode, call.reservation_id
    return (f"${len(now)}\r\n{now}\r\n${len(tokens)}\r\n{tokens}\r\n${len(cost)}\r\n{cost}\r\n"
            f"${len(mode)}\r\n{mode}\r\n${len(rid)}\r\n{rid}\r\n").encode()


def _wire(layout: Layout) -> _ReserveWire:
    wire = layout.wire
    if not isinstance(wire, _ReserveWire):   # None until this store first encodes the layout
        wire = layout.wire = _ReserveWire(layout)
    return wire


def _pack_reserve(call: ReserveCall) -> bytes:
    wire = _wire(call.layout)
    amounts = wire.pack_amounts(*call.amounts)
    return b"".join((wire.reserve_head, _reserve_args(call.now_ms, call.reservation_id, call.lease_until_ms),
                     wire.reserve_tail, b"$%d\r\n%b\r\n" % (len(amounts), amounts), wire.fields))


def _pack_settle(call: SettleCall) -> bytes:
    args = _settle_args(call)
    layout = call.layout
    if layout is not None and isinstance(layout.wire, _ReserveWire):
        wire = layout.wire
        return b"".join((wire.settle_head, _bulk(call.record_key), wire.settle_keys, args, wire.fields))
    # the reconciler's settle: the script reads the fields from the record
    namespace = call.leases_key[: -len(":leases")]
    keys = (namespace, call.leases_key, call.record_key, *call.keys)
    return b"".join((b"*%d\r\n" % (3 + len(keys) + 5), SETTLE.head, _bulk(len(keys)),
                     b"".join(map(_bulk, keys)), args))


def _outcome(reply: Replies) -> Outcome:
    status = reply[0]
    if status == 2:
        return ALREADY_RESERVED
    shadow = tuple(int(i) - 1 for i in reply[3].split(b",")) if reply[3] else ()
    return Outcome(status == 1, reply[1] - 1, reply[2], shadow, tuple(reply[4:]))


def _record_keys(record: bytes) -> list[str]:
    """The earlier-version keys a record lists: after the packed part (see reserve.lua)
    and the fields, past the newline."""
    n = int(struct.unpack_from("<d", record)[0])
    text = record[8 + 56 * n:]
    return text[text.index(b"\n") + 1:].decode().split(" ")


def _decode_value(raw: bytes) -> policy.Stored:
    kind = raw[0]
    if kind == 5:
        return decode_job(raw)
    if kind == 1:
        level, ts = struct.unpack_from("<dd", raw, 1)
        return int(level), int(ts)
    return int(struct.unpack_from("<d", raw, 1)[0])


class RedisStore(RedisJobs):
    name = "redis"

    def __init__(self, url: str, timeout_s: float, client: str = "resp") -> None:
        if client == "resp":
            self._transport: RespClient | RedisPyConnections = RespClient(url, timeout_s)
        else:
            self._transport = RedisPyConnections(url, timeout_s)
        self.timeout_s = timeout_s
        self.round_trips = 0
        # A cluster is recognised at the first call (CLUSTER SLOTS), through the lean client only.
        self._cluster: ClusterRouter | None = None
        self._checked = not isinstance(self._transport, RespClient)
        # Once, whoever asks first: concurrent first calls wait for the same answer (the
        # seed connection is closed when it turns out to be a cluster).
        self._detect = SingleFlight(self._detect_once)

    async def _detect_once(self) -> None:
        transport = self._transport
        assert isinstance(transport, RespClient)
        [reply] = await transport.exchange_raw(pack(b"CLUSTER", b"SLOTS"), 1)
        if is_cluster_reply(reply) and self._cluster is None:
            router = ClusterRouter(transport.params, self.timeout_s, _script_loads, len(SCRIPTS))
            router.apply_slots(reply)
            self._cluster = router
            await transport.close()     # the router keeps its own connection per node
        self._checked = True

    async def warm(self) -> None:
        """Before the first request: recognise a cluster and load the scripts wherever they
        will run, so a replica's first burst pays for neither (nor risks the store timeout)."""
        if not self._checked:
            await self._detect()
        if self._cluster is not None:
            await self._cluster.load_scripts_everywhere()
        else:
            self.round_trips += 1
            await self._transport.exchange(_script_loads(), len(SCRIPTS))

    async def run_keyed(self, items: list[tuple[str, bytes]]) -> Replies:
        """Commands with the key that routes each (its namespace's slot, on a cluster)."""
        if not self._checked:
            await self._detect()
        if self._cluster is not None:
            self.round_trips += 1
            return await self._cluster.run(items)
        return await self._run(b"".join(command for _, command in items), len(items))

    async def _run(self, payload: bytes, replies: int) -> Replies:
        self.round_trips += 1
        try:
            return await self._transport.exchange(payload, replies)
        except ScriptMissing:
            return await self._load_scripts_and_retry(payload, replies)

    async def _load_scripts_and_retry(self, payload: bytes, replies: int) -> Replies:
        self.round_trips += 2
        await self._transport.exchange(_script_loads(), len(SCRIPTS))
        return await self._transport.exchange(payload, replies)

    # reserve and settle inline _run: one coroutine less per call on the hot path
    async def reserve(self, calls: Sequence[ReserveCall]) -> list[Outcome]:
        if not calls:
            return []
        if not self._checked or self._cluster is not None:
            return [_outcome(r) for r in await self.run_keyed([(c.layout.namespace, _pack_reserve(c)) for c in calls])]
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
        if not self._checked or self._cluster is not None:
            return await self.run_keyed([(c.leases_key, _pack_settle(c)) for c in calls])
        payload = b"".join(map(_pack_settle, calls)) if len(calls) > 1 else _pack_settle(calls[0])
        self.round_trips += 1
        try:
            return await self._transport.exchange(payload, len(calls))
        except ScriptMissing:
            return await self._load_scripts_and_retry(payload, len(calls))

    async def sweep(self, namespaces: Sequence[str], cursors: Sequence[int], now_ms: int,
                    count: int) -> list[tuple[int, int]]:
        if not namespaces:
            return []
        replies = await self.run_keyed([
            (ns, b"".join((b"*7\r\n", SWEEP.head, _bulk(1), _bulk(ns), _bulk(now_ms), _bulk(cursor), _bulk(count))))
            for ns, cursor in zip(namespaces, cursors)])
        return [(int(reply[0]), reply[1]) for reply in replies]

    async def renew(self, renewals: Sequence[LeaseRenewal]) -> None:
        commands = []
        for r in renewals:
            if r.reservation_ids:
                args: list[object] = [b"ZADD", r.leases_key, b"XX"]
                for rid in r.reservation_ids:
                    args += (r.until_ms, rid)
                commands.append((r.leases_key, pack(*args)))
        if commands:
            await self.run_keyed(commands)

    async def expired(self, leases_keys: Sequence[str], now_ms: int, limit: int) -> list[list[str]]:
        if not leases_keys:
            return []
        replies = await self.run_keyed([(key, pack(b"ZRANGEBYSCORE", key, b"-inf", b"(%d" % now_ms, b"LIMIT", 0, limit))
                                         for key in leases_keys])
        return [[rid.decode() for rid in reply] for reply in replies]

    async def record_keys(self, record_keys: Sequence[str]) -> list[list[str] | None]:
        if not record_keys:
            return []
        commands = []
        for key in record_keys:
            namespace = namespace_of(key)
            commands.append((key, pack(b"HGET", namespace, key[len(namespace) + 1:])))
            commands.append((key, pack(b"HGET", key, b"k")))   # a record of an earlier version
        replies = await self.run_keyed(commands)
        out: list[list[str] | None] = []
        for record, old in zip(replies[::2], replies[1::2]):
            if record is not None:
                out.append(_record_keys(record))
            else:
                out.append(old.decode().split(" ") if old is not None else None)
        return out

    async def value(self, key: str) -> policy.Stored:
        namespace = namespace_of(key)
        name = key[len(namespace) + 1:]
        whole, period_less = await self.run_keyed([(key, pack(b"HGET", namespace, name)),
                                                    (key, pack(b"HGET", namespace, name.rsplit(":", 1)[0]))])
        if whole is not None:
            return _decode_value(whole)
        if period_less is not None and period_less[0] == 4:
            return _decode_value(period_less)
        return await self._legacy_value(key)

    async def _legacy_value(self, key: str) -> policy.Stored:
        # Two reads, not atomic: a key settled in between reads as gone.
        [kind] = await self.run_keyed([(key, pack(b"TYPE", key))])
        if kind == b"hash":
            level, ts = (await self.run_keyed([(key, pack(b"HMGET", key, b"l", b"t"))]))[0]
            return None if level is None else (int(level), int(ts))
        if kind == b"string":
            [raw] = await self.run_keyed([(key, pack(b"GET", key))])
            if raw is None:
                return None
            if b" " in raw:  # a bucket: "level ts"
                level, ts = raw.split(b" ")
                return int(level), int(ts)
            return int(raw)
        return None

    async def open_reservations(self, leases_key: str) -> int:
        return int((await self.run_keyed([(leases_key, pack(b"ZCARD", leases_key))]))[0])

    async def close(self) -> None:
        await self._transport.close()
        if self._cluster is not None:
            await self._cluster.close()
