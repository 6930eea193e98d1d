"""Two replicas' engines see the same subject cross a rule in the same instant (one Redis,
one key store): the claim in the store lets exactly one of them act."""

from __future__ import annotations

import asyncio

from tests.control.conftest import gateway, write_config

RULES = [{"name": "burst", "when": {"hour_requests": 3}, "action": "suspend", "duration_s": 600}]


async def test_one_action_when_replicas_race(tmp_path, backend, redis_server):
    config = write_config(tmp_path, backend.port, store={"url": redis_server.url},
                          abuse={"shadow": False, "batch_s": 3600, "min_history_days": 0, "rules": RULES})
    async with gateway(config) as one, gateway(config) as two:
        plaintext = await one.new_key()
        key_id = plaintext[3:19]
        observed = (1.0e9, "acme", key_id, None, 200, 5, False, "small-chat", False, True, False, None, None)
        for _ in range(5):
            one.parts.abuse.observer.buffer.append(observed)
            two.parts.abuse.observer.buffer.append(observed)
        taken = await asyncio.gather(one.parts.abuse.flush(), two.parts.abuse.flush())
        assert sorted(len(t) for t in taken) == [0, 1]
        audit = [a for a in await one.audit() if a["action"] == "abuse:suspend"]
        assert len(audit) == 1 and audit[0]["key_id"] == key_id
