"""The Redis store's agent-job calls: creation, closing, the dispatch mark and reads.

Each is one script (``lua/job_create.lua``, ``job_close.lua``, ``job_dispatch.lua``) or
one HMGET on the tenant's namespace hash, so a job's counters, its terms, its children's
ids and the tenant's open jobs all live in the tenant's hash slot, like every value a
request's reservation touches. A request's own charge against its job is part of that
reservation (``reserve.lua``'s job checks), not a call of its own.
"""

from __future__ import annotations

import struct
from typing import Sequence

from .policy import JobValue
from .resp import Replies, _bulk, pack
from .scripts import JOB_CLOSE, JOB_CREATE, JOB_DISPATCH
from .store import JobCreate, JobRecord

_JOB = struct.Struct("<Bdddddddd")


def decode_job(raw: bytes) -> JobValue:
    return JobValue(*(int(v) for v in _JOB.unpack(raw)[1:]))


def _script(head: bytes, keys: Sequence[str], args: Sequence[object]) -> bytes:
    return b"".join((b"*%d\r\n" % (3 + len(keys) + len(args)), head, _bulk(len(keys)),
                     b"".join(map(_bulk, keys)), b"".join(map(_bulk, args))))


class RedisJobs:
    """Mixed into ``RedisStore``: needs its ``run_keyed`` and the three scripts' heads."""

    async def run_keyed(self, items: list[tuple[str, bytes]]) -> Replies:
        raise NotImplementedError   # RedisStore's

    async def create_job(self, call: JobCreate) -> tuple[int, int]:

        limits = call.limits
        args = [call.now_ms, call.job_id, call.deadline_ms, call.budget, limits.per_minute,
                limits.max_open, call.meta, call.parent_id, call.parent_budget,
                call.parent_max_children, *call.ancestor_ids]
        ns = call.namespace
        [reply] = await self.run_keyed([(ns, _script(JOB_CREATE.head, (ns, ns + ":jobs"), args))])
        return int(reply[0]), int(reply[1])

    async def close_jobs(self, namespace: str, jobs: Sequence[tuple[str, int, int]], state: int) -> int:

        if not jobs:
            return 0
        args: list[object] = [state]
        for job_id, budget, parent in jobs:
            args += (job_id, budget, parent + 1)
        [reply] = await self.run_keyed([(namespace, _script(JOB_CLOSE.head, (namespace, namespace + ":jobs"), args))])
        return int(reply)

    async def dispatch(self, namespace: str, reservation_id: str, chain: Sequence[str], now_ms: int) -> int:

        [reply] = await self.run_keyed([(namespace, _script(JOB_DISPATCH.head, (namespace,),
                                                            (now_ms, reservation_id, *chain)))])
        return int(reply)

    async def jobs(self, namespace: str, job_ids: Sequence[str]) -> list[JobRecord]:
        if not job_ids:
            return []
        fields: list[object] = []
        for job_id in job_ids:
            fields += (f"j:{job_id}", f"j:{job_id}:m", f"j:{job_id}:c")
        [reply] = await self.run_keyed([(namespace, pack(b"HMGET", namespace, *fields))])
        out = []
        for at in range(0, len(reply), 3):
            raw, meta, children = reply[at:at + 3]
            out.append(JobRecord(decode_job(raw) if raw is not None else None, meta,
                                 tuple(children.decode().split(" ")) if children else ()))
        return out

    async def dispatched(self, namespace: str, reservation_id: str) -> bool:
        [reply] = await self.run_keyed([(namespace, pack(b"HEXISTS", namespace, f"d:{reservation_id}"))])
        return bool(reply)
