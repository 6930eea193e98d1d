"""The stolen-key replay (issue 18): a key with two weeks of ordinary history (a few
requests an office hour, moderate output, from its own network) starts sending
maximum-output requests at 3 am from a network it never used. Within the policy's window
it is first reduced, then suspended; the owner's traffic before that is untouched. The same
replay in shadow mode changes no response and records every would-be action."""

from __future__ import annotations

import pytest

from .helpers import DAY, T0, Clock, abuse_config, essentials, gateway, observed

OWNER_NET = "203.0.113.7"
THIEF_NET = "198.51.100.23"


def _chat(max_tokens: int) -> dict:
    return {"model": "small-chat", "messages": [{"role": "user", "content": "summarise the meeting notes"}],
            "max_tokens": max_tokens}


async def _replay(config, clock: Clock):
    """(owner's responses, thief's responses, controls in force before the attack, audit)."""
    async with gateway(config, clock) as gw:
        plaintext = await gw.new_key()
        key = {"authorization": f"Bearer {plaintext}"}
        engine = gw.parts.abuse
        owner, thief = [], []
        for day in range(14):
            for hour in range(9, 17):
                clock.now = T0 + day * DAY + hour * 3600
                for _ in range(3):
                    clock.advance(600)
                    resp = await gw.client.post("/v1/chat/completions", json=_chat(512),
                                                headers={**key, "x-forwarded-for": OWNER_NET, "x-mock-tokens": "200"})
                    owner.append(resp)
                if engine is not None:
                    await observed(engine, 3)
                    await engine.flush()
        before = list(gw.parts.control.view.controls)
        clock.now = T0 + 14 * DAY + 3 * 3600
        steps = []
        for _ in range(14):
            clock.advance(60)
            resp = await gw.client.post("/v1/chat/completions", json=_chat(8100),
                                        headers={**key, "x-forwarded-for": THIEF_NET, "x-mock-tokens": "2000"})
            thief.append(resp)
            if engine is not None:
                await observed(engine, 1)
            taken = await engine.flush() if engine is not None else []
            steps.append([c.kind for c in taken])
        audit = [a for a in await gw.audit() if a["action"].startswith("abuse:")]
        return owner, thief, before, steps, audit, plaintext[3:19]


@pytest.fixture(params=["memory", "redis"])
def store(request):
    if request.param == "memory":
        return None
    return {"url": request.getfixturevalue("redis_server").url}


async def test_stolen_key_is_reduced_then_suspended(tmp_path, backend, store):
    owner, thief, before, steps, audit, key_id = await _replay(
        abuse_config(tmp_path, backend.port, shadow=False, store=store), Clock(T0))
    assert all(r.status_code == 200 for r in owner), [r.text for r in owner if r.status_code != 200][:1]
    assert before == []                       # two weeks of ordinary use: no action at all
    assert steps[3] == ["reduce_concurrency"] and steps[9] == ["suspend"]
    assert [kind for step in steps for kind in step] == ["reduce_concurrency", "suspend"]
    assert [r.status_code for r in thief] == [200] * 10 + [403] * 4
    error = thief[-1].json()["error"]
    assert error["code"] == "key_suspended" and "network" not in error["message"]
    reduce, suspend = audit
    assert (reduce["action"], suspend["action"]) == ("abuse:reduce_concurrency", "abuse:suspend")
    assert suspend["scope"] == f"key:{key_id}" and suspend["reviewer"] == "tokenward:abuse"
    assert suspend["detail"]["rule"] == "stolen-key-suspend" and suspend["detail"]["automatic"] is True
    assert suspend["duration_s"] == 86400
    signals = suspend["detail"]["signals"]
    assert signals["output_ratio"] >= 10 and signals["max_output_share"] == 1.0 and signals["new_network"] >= 1
    assert not any(str(v).startswith(("198.51", "203.0")) for v in signals.values())
    if store is not None:   # what the shared store holds: keyed hashes and counts, never an address or text
        dump = _redis_dump(store["url"])
        assert "tw:a:{k:" + key_id + "}" in dump
        for raw in (THIEF_NET, OWNER_NET, "198.51.100", "203.0.113", "summarise the meeting notes"):
            assert raw not in dump


def _redis_dump(url: str) -> str:
    import redis

    client = redis.Redis.from_url(url)
    out = []
    for key in client.keys("*"):
        kind = client.type(key)
        value = (client.hgetall(key) if kind == b"hash" else client.zrange(key, 0, -1, withscores=True)
                 if kind == b"zset" else client.get(key) if kind == b"string" else b"")
        out.append(f"{key!r} {value!r}")
    client.close()
    return "\n".join(out).replace("b'", "").replace("'", "")


async def test_shadow_mode_changes_no_response_and_records_every_would_be_action(tmp_path, backend):
    plain = await _replay(abuse_config(tmp_path / "off", backend.port, shadow=None), Clock(T0))
    shadow = await _replay(abuse_config(tmp_path / "shadow", backend.port, shadow=True), Clock(T0))
    for ours, theirs in ((plain[0], shadow[0]), (plain[1], shadow[1])):
        assert [essentials(r) for r in ours] == [essentials(r) for r in theirs]
    assert all(r.status_code == 200 for r in shadow[1])
    assert shadow[3][3] == ["reduce_concurrency"] and shadow[3][9] == ["suspend"]
    assert [(a["action"], a["detail"]["shadow"], a["reason"]) for a in shadow[4]] == [
        ("abuse:reduce_concurrency", True, "shadow: would reduce_concurrency: rule stolen-key-reduce"),
        ("abuse:suspend", True, "shadow: would suspend: rule stolen-key-suspend")]
