"""The new-capability and refusal signals, raised by traffic through the gateway (not set by
hand): a key that has only ever used one model turns to another, and a key that keeps
hitting its rate limit; each fires the rule that names its signal, and only that one."""

from __future__ import annotations

from .helpers import DAY, T0, Clock, abuse_config, gateway, observed

RULES = [
    {"name": "new-model", "when": {"new_capability": 1}, "action": "review"},
    {"name": "hammering", "when": {"refusals": 5}, "action": "reduce_concurrency", "concurrency": 1,
     "duration_s": 600},
]


def _chat(model: str = "small-chat") -> dict:
    return {"model": model, "messages": [{"role": "user", "content": "status of ticket 12"}], "max_tokens": 16}


async def test_a_model_the_key_never_used_and_repeated_refusals_fire_their_rules(tmp_path, backend):
    clock = Clock(T0)
    config = abuse_config(tmp_path, backend.port, shadow=False, rules=RULES, min_history_days=1)
    async with gateway(config, clock) as gw:
        engine = gw.parts.abuse
        steady = {"authorization": f"Bearer {await gw.new_key()}"}
        for day in range(3):                            # history: small-chat only, a few an hour
            for hour in range(9, 12):
                clock.now = T0 + day * DAY + hour * 3600
                for _ in range(2):
                    clock.advance(300)
                    assert (await gw.client.post("/v1/chat/completions", json=_chat(),
                                                 headers=steady)).status_code == 200
                await observed(engine, 2)
                assert await engine.flush() == []       # ordinary use: nothing fires
        clock.now = T0 + 3 * DAY + 10 * 3600
        resp = await gw.client.post("/v1/chat/completions", json=_chat("large-chat"), headers=steady)
        assert resp.status_code == 200
        await observed(engine, 1)
        taken = await engine.flush()
        assert [(c.kind, c.rule) for c in taken] == [("review", "new-model")]
        assert taken[0].signals["new_capability"] >= 1 and taken[0].signals["refusals"] == 0

        # globex's plan allows 30 requests a minute: 36 at once, 6 refused with 429
        hammer = {"authorization": f"Bearer {await gw.new_key('globex')}"}
        clock.advance(3600)
        statuses = [(await gw.client.post("/v1/chat/completions", json=_chat(), headers=hammer)).status_code
                    for _ in range(36)]
        assert statuses.count(429) >= 5 and statuses.count(200) >= 25
        await observed(engine, 36)
        taken = await engine.flush()
        hammering = [c for c in taken if c.rule == "hammering"]
        assert [(c.kind, c.tenant) for c in hammering] == [("reduce_concurrency", "globex")]
        assert hammering[0].signals["refusals"] >= 5
        assert not [c for c in taken if c.rule == "new-model" and c.tenant == "acme"]
