"""Redis Cluster for the budget store: each call goes to the node that owns its slot.

Every key of one script call shares its namespace's ``{hash tag}``, so a call lives in
exactly one slot and runs whole on one node; calls for different namespaces in one batch
go to their nodes in parallel, one pipelined write per node, and their replies come back
in the batch's order.

The slot map comes from ``CLUSTER SHARDS`` of any node (Redis 7 and Valkey: it names each
node's health, so a primary marked failed is not routed to), or ``CLUSTER SLOTS`` where
the node does not know that command (Redis 6). A ``MOVED`` answer (a slot moved,
or a failover) refreshes the map and sends the call again; ``ASK`` (a slot being
migrated) sends it once to the named node after ``ASKING``; ``TRYAGAIN`` (a script
whose keys are split between the two nodes of a migrating slot for a moment) waits a few
milliseconds and asks again, giving up as unavailable after ~35 ms; ``NOSCRIPT`` loads the
scripts on that node (each node has its own script cache). Anything else that goes wrong
is ``StoreUnavailable``, as for a single server; a node that stopped answering also
marks the slot map stale, so the next call asks the other nodes where its slots went (a
replica promoted in its place). Each node has its own breaker, and its failures are
raised as ``NodeUnavailable``, which the store's breaker does not count: one dead node
refuses only the tenants whose slots it held.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Sequence

import hiredis

from .guard import Breaker
from .resp import Replies, RespClient, SingleFlight, pack
from .store import StoreUnavailable

SLOTS = 16384
_ASKING = pack(b"ASKING")


def _crc16_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
        table.append(crc & 0xFFFF)
    return table


_TABLE = _crc16_table()


def key_slot(key: bytes) -> int:
    """Redis Cluster's slot of a key: CRC16 (XMODEM) of its hash tag, or of the whole key."""
    start = key.find(b"{")
    if start >= 0:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            key = key[start + 1:end]
    crc = 0
    for byte in key:
        crc = ((crc << 8) & 0xFFFF) ^ _TABLE[((crc >> 8) ^ byte) & 0xFF]
    return crc % SLOTS


def is_cluster_reply(reply: object) -> bool:
    """Does a ``CLUSTER SLOTS`` reply describe a cluster (not an error from a single server)?"""
    return isinstance(reply, list) and len(reply) > 0


def _fields(flat: Replies) -> dict[bytes, Any]:
    return {flat[i]: flat[i + 1] for i in range(0, len(flat) - 1, 2)}


def shards_as_slots(reply: object) -> Replies:
    """A ``CLUSTER SHARDS`` reply in ``CLUSTER SLOTS``'s shape: [start, end, primary,
    replicas...] per slot range, each node [host, port]; a primary not marked online is
    left out, so its slots have no owner until a replica is promoted."""
    if not isinstance(reply, list):
        return []
    out: Replies = []
    for shard in reply:
        fields = _fields(shard) if isinstance(shard, list) else {}
        ranges = fields.get(b"slots") or []
        nodes = [_fields(n) for n in fields.get(b"nodes") or [] if isinstance(n, list)]
        primaries = [n for n in nodes if n.get(b"role") == b"master" and n.get(b"health") in (b"online", None)]
        if not primaries:
            continue
        members = primaries[:1] + [n for n in nodes if n.get(b"role") != b"master"]
        addresses = [[n.get(b"endpoint") or n.get(b"ip"), int(n.get(b"port") or n.get(b"tls-port") or 0)]
                     for n in members]
        for i in range(0, len(ranges) - 1, 2):
            out.append([int(ranges[i]), int(ranges[i + 1]), *addresses])
    return out


class NodeUnavailable(StoreUnavailable):
    """One cluster node did not answer; the others may: not a reason to refuse every tenant."""

    node_local = True


class ClusterRouter:
    REFRESH_EVERY_S = 0.1    # while a node is down, ask for the slot map at most this often

    def __init__(self, seed: dict[str, Any], timeout_s: float, load_scripts: Callable[[], bytes],
                 script_count: int) -> None:
        self._seed = seed
        self.timeout_s = timeout_s
        self._load_scripts = load_scripts        # the SCRIPT LOAD commands, one payload
        self._script_count = script_count        # ... and how many replies they get
        self._nodes: dict[tuple[str, int], RespClient] = {}
        self._owner: list[tuple[str, int] | None] = [None] * SLOTS
        self._slot_cache: dict[str, int] = {}
        self.refresh = SingleFlight(self._refresh)  # concurrent callers wait for the same one
        self._stale = False
        self._refreshed_at = float("-inf")
        self._known: list[tuple[str, int]] = []
        self._breakers: dict[tuple[str, int], Breaker] = {}

    @staticmethod
    def _loop_time() -> float:
        return asyncio.get_running_loop().time()

    def apply_slots(self, reply: Replies) -> None:
        owner: list[tuple[str, int] | None] = [None] * SLOTS
        known: list[tuple[str, int]] = []
        for entry in reply:
            start, end = entry[0], entry[1]
            nodes = [((n[0].decode() if n[0] else self._seed.get("host", "127.0.0.1")), int(n[1]))
                     for n in entry[2:]]
            known += nodes
            for slot in range(start, end + 1):
                owner[slot] = nodes[0]        # the primary; replicas follow it
        self._owner = owner
        self._known = list(dict.fromkeys(known))   # every node, to ask for the map next time

    def slot(self, key: str) -> int:
        slot = self._slot_cache.get(key)
        if slot is None:
            if len(self._slot_cache) > 65536:
                self._slot_cache.clear()
            slot = self._slot_cache[key] = key_slot(key.encode())
        return slot

    def _client(self, node: tuple[str, int]) -> RespClient:
        client = self._nodes.get(node)
        if client is None:
            params = {k: v for k, v in self._seed.items() if k not in ("path", "host", "port")}
            client = self._nodes[node] = RespClient.from_params({**params, "host": node[0], "port": node[1]},
                                                                self.timeout_s)
        return client

    async def _refresh(self) -> None:
        failure: Exception | None = None
        for node in [*self._known, None]:     # None: the address in store.url
            client = self._client(node) if node is not None else RespClient.from_params(self._seed, self.timeout_s)
            try:
                [reply] = await client.exchange_raw(pack(b"CLUSTER", b"SHARDS"), 1)
                if isinstance(reply, hiredis.ReplyError):   # a node older than Redis 7
                    [reply] = await client.exchange_raw(pack(b"CLUSTER", b"SLOTS"), 1)
                else:
                    reply = shards_as_slots(reply)
            except StoreUnavailable as exc:
                failure = exc
                continue
            finally:
                if node is None:
                    await client.close()
            if is_cluster_reply(reply):
                self.apply_slots(reply)
                self._refreshed_at = self._loop_time()
                return
        raise StoreUnavailable(f"budget store: no cluster node gave its slot map ({failure})")

    async def run(self, items: Sequence[tuple[str, bytes]]) -> Replies:
        """Send each (routing key, command) to its slot's node; replies in the items' order."""
        if self._stale and self._loop_time() - self._refreshed_at >= self.REFRESH_EVERY_S:
            # a node stopped answering: its slots may have failed over to a replica elsewhere
            await self.refresh()
            self._stale = False
        replies: Replies = [None] * len(items)
        pending = list(range(len(items)))
        asking: dict[int, tuple[str, int]] = {}
        for _attempt in range(4):
            groups: dict[tuple[str, int], list[int]] = {}
            for i in pending:
                node = asking.get(i) or self._owner[self.slot(items[i][0])]
                if node is None:
                    await self.refresh()
                    node = self._owner[self.slot(items[i][0])]
                    if node is None:
                        raise StoreUnavailable(f"budget store: no cluster node serves the slot of {items[i][0]}")
                groups.setdefault(node, []).append(i)
            answers = await asyncio.gather(*(self._send(node, [items[i][1] for i in idx], [i in asking for i in idx])
                                             for node, idx in groups.items()))
            pending, asking, moved, unsettled = [], {}, False, False
            for (node, idx), got in zip(groups.items(), answers):
                for i, reply in zip(idx, got):
                    if isinstance(reply, hiredis.ReplyError):
                        text = str(reply)
                        if text.startswith("MOVED "):
                            moved = True
                            pending.append(i)
                            continue
                        if text.startswith("ASK "):
                            host, _, port = text.split(" ")[2].rpartition(":")
                            asking[i] = (host or node[0], int(port))
                            pending.append(i)
                            continue
                        if text.startswith("TRYAGAIN"):
                            # a multi-key call in a slot being migrated, its keys split
                            # between the nodes for a moment: wait a little and ask again
                            unsettled = True
                            pending.append(i)
                            continue
                        if text.startswith("NOSCRIPT"):
                            await self._client(node).exchange_raw(self._load_scripts(), self._script_count)
                            pending.append(i)
                            continue
                        raise StoreUnavailable(f"budget store: error reply: {text}")
                    replies[i] = reply
            if not pending:
                return replies
            if moved:
                await self.refresh()
            if unsettled:
                await asyncio.sleep(0.005 * 2 ** _attempt)
        raise StoreUnavailable("budget store: the cluster kept redirecting (a slot is being migrated)")

    async def _send(self, node: tuple[str, int], commands: list[bytes], asking: list[bool]) -> Replies:
        # One breaker per node: a dead node fails its own calls fast without the store's
        # breaker refusing the tenants whose slots live on healthy nodes.
        breaker = self._breakers.get(node)
        if breaker is None:
            breaker = self._breakers[node] = Breaker()
        if not breaker.allow():
            raise NodeUnavailable(f"budget store: cluster node {node[0]}:{node[1]} is not answering")
        try:
            got = await self._send_to(node, commands, asking)
        except StoreUnavailable as exc:
            breaker.failure()
            self._stale = True
            raise NodeUnavailable(f"budget store: cluster node {node[0]}:{node[1]}: {exc}") from exc
        except BaseException:
            breaker.abandon()
            raise
        breaker.success()
        return got

    async def _send_to(self, node: tuple[str, int], commands: list[bytes], asking: list[bool]) -> Replies:
        if not any(asking):
            return await self._client(node).exchange_raw(b"".join(commands), len(commands))
        payload = b"".join(_ASKING + c if ask else c for c, ask in zip(commands, asking))
        got = await self._client(node).exchange_raw(payload, len(commands) + sum(asking))
        out, at = [], 0
        for ask in asking:
            at += ask              # skip ASKING's +OK
            out.append(got[at])
            at += 1
        return out

    async def load_scripts_everywhere(self) -> None:
        primaries = {node for node in self._owner if node is not None}
        await asyncio.gather(*(self._client(node).exchange(self._load_scripts(), self._script_count)
                               for node in primaries))

    async def close(self) -> None:
        nodes, self._nodes = self._nodes, {}
        for client in nodes.values():
            await client.close()
