"""Signal state in Redis (or Valkey, or a Redis Cluster), shared by every replica.

Each subject's keys share one hash tag (``tw:a:{k:<key id>}``, ``tw:a:{t:<tenant>}``), so
its script runs on one node; a batch of subjects is one pipelined round trip through the
budget store's own client (``RedisStore.run_keyed``: the same RESP transport and cluster
routing, on a connection of its own, so the budget's calls never queue behind these).
Scripts go as EVAL: a batch a second does not need EVALSHA's saving, and EVAL cannot
meet a script cache that lost them (a restart, a failover, another node).
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING, Sequence

from ..budget.limits import safe
from ..budget.resp import pack
from .state import Batch, Params, Raw
from .store import LISTED, Band, BandCall, SubjectCall

if TYPE_CHECKING:
    from ..budget.redis import RedisStore


def _script(name: str) -> bytes:
    return resources.files("tokenward.abuse").joinpath("lua").joinpath(name).read_bytes()


OBSERVE, CAMPAIGN, SLOT = _script("observe.lua"), _script("campaign.lua"), _script("slot.lua")


def _pairs(table: dict[str, int]) -> list[object]:
    out: list[object] = [len(table)]
    for name, count in table.items():
        out += (name, count)
    return out


class RedisSignalStore:
    name = "redis"

    def __init__(self, store: RedisStore, prefix: str = "tw") -> None:
        self.store = store            # a budget.redis.RedisStore of our own
        self.prefix = prefix

    def _subject(self, subject: str) -> str:
        kind, _, name = subject.partition(":")
        return f"{self.prefix}:a:{{{kind}:{safe(name)}}}"

    async def observe(self, calls: Sequence[SubjectCall], now: int, p: Params) -> list[Raw]:
        if not calls:
            return []
        items = []
        for subject, batch in calls:
            h = self._subject(subject)
            items.append((h, pack(b"EVAL", OBSERVE, 4, h, h + ":n", h + ":c", h + ":e", *self._args(batch, now, p))))
        return [Raw(*(int(v) for v in reply)) for reply in await self.store.run_keyed(items)]

    @staticmethod
    def _args(batch: Batch, now: int, p: Params) -> list[object]:
        return [now, p.retention_s, p.baseline_days, p.min_history_s, p.novelty_s, p.refusal_minutes,
                p.max_networks, p.max_capabilities, batch.requests, batch.output, batch.at_max, batch.refusals,
                *_pairs(batch.networks), *_pairs(batch.capabilities), *_pairs(batch.events)]

    async def campaign(self, calls: Sequence[BandCall], now: int, window_s: int, max_members: int
                       ) -> list[Band]:
        if not calls:
            return []
        items = []
        for band, member in calls:
            key = f"{self.prefix}:a:{{b:{band}}}"
            items.append((key, pack(b"EVAL", CAMPAIGN, 1, key, now, window_s, max_members, member, LISTED)))
        return [Band(int(r[0]), int(r[1]), tuple(m.decode() for m in r[2:])) for r in await self.store.run_keyed(items)]

    async def events(self, tenants: Sequence[str], now: int, window_s: int) -> dict[str, dict[str, int]]:
        if not tenants:
            return {}
        keys = [self._subject("t:" + t) + ":e" for t in tenants]
        replies = await self.store.run_keyed([(k, pack(b"HGETALL", k)) for k in keys])
        first = now // 60 - window_s // 60
        out: dict[str, dict[str, int]] = {}
        for tenant, reply in zip(tenants, replies):
            totals: dict[str, int] = {}
            for field, count in zip(reply[::2], reply[1::2]):
                minute, name = field.decode().split("|", 1)
                if int(minute) > first:
                    totals[name] = totals.get(name, 0) + int(count)
            out[tenant] = totals
        return out

    async def take_slot(self, key_id: str, request_id: str, limit: int, now_ms: int, lease_ms: int) -> bool:
        key = self._subject("k:" + key_id) + ":s"
        [taken] = await self.store.run_keyed([(key, pack(b"EVAL", SLOT, 1, key, now_ms, request_id,
                                                         now_ms + lease_ms, limit))])
        return bool(taken)

    async def give_slot(self, key_id: str, request_id: str) -> None:
        key = self._subject("k:" + key_id) + ":s"
        await self.store.run_keyed([(key, pack(b"ZREM", key, request_id))])

    async def shared_secret(self, candidate: bytes) -> bytes:
        key = f"{self.prefix}:a:secret"
        _, secret = await self.store.run_keyed([(key, pack(b"SET", key, candidate, b"NX")),
                                                (key, pack(b"GET", key))])
        return bytes(secret)   # GET's bulk reply

    async def claim(self, name: str, now_ms: int, ttl_ms: int) -> bool:
        key = f"{self.prefix}:a:claim:{safe(name)}"
        [answer] = await self.store.run_keyed([(key, pack(b"SET", key, b"1", b"NX", b"PX", ttl_ms))])
        return answer is not None

    async def sweep(self, now: int, p: Params) -> int:
        # Every key written here carries the retention as its TTL (refreshed on each write),
        # so Redis itself drops a subject idle for the retention; fields inside a live
        # subject are dropped by observe.lua as they age out.
        return 0

    async def close(self) -> None:
        await self.store.close()
