"""A pool of three real backend processes (``tokenward mock-upstream``) behind one model:
routing on outstanding reserved work, weights, caps with refusal or queue, prefix affinity,
and the per-target gauges (docs/upstreams.md, "Pools")."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from tests.fixtures.mock_processes import start_mocks
from tests.support import chat
from tests.upstream.pool_helpers import (
    URL, eventually, pool_gateway, record_of, records_by_id, served_by, target_gauges,
)

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def mocks():
    procs = start_mocks(3)
    yield procs
    for proc in procs:
        proc.stop()


async def _long_stream_then_six(gw, client):
    """A long stream, started; six short requests while it runs: (its target, theirs)."""
    headers = {"x-mock-tokens": "400", "x-mock-token-rate": "50"}
    async with client.stream("POST", gw.url + URL, json=chat(max_tokens=400, stream=True), headers=headers) as long:
        assert long.status_code == 200
        chunks = long.aiter_bytes()                   # kept: a dropped iterator closes the stream
        await chunks.__anext__()                      # it has started answering
        ids = []
        for _ in range(6):
            resp = await client.post(gw.url + URL, json=chat(max_tokens=8))
            assert resp.status_code == 200
            ids.append(resp.headers["x-request-id"])
        long_id = long.headers["x-request-id"]
    records = records_by_id(gw)
    return served_by(await record_of(gw, long_id)), [served_by(records[i]) for i in ids]


async def test_a_long_stream_on_one_target_sends_the_next_requests_to_the_other_two(mocks, tmp_path):
    async with pool_gateway([m.url for m in mocks], tmp_path) as gw, gw.client() as client:
        busy, others = await _long_stream_then_six(gw, client)
    assert busy not in others
    assert Counter(others) == {m.label: 3 for m in mocks if m.label != busy}   # ties rotate: B C B C B C


async def test_round_robin_sends_them_to_the_busy_target_too(mocks, tmp_path):
    """The control: in turn, whatever is in flight."""
    async with pool_gateway([m.url for m in mocks], tmp_path, ", routing: round_robin") as gw, gw.client() as client:
        busy, others = await _long_stream_then_six(gw, client)
    assert Counter(others)[busy] == 2


async def test_least_requests_balances_the_count_not_the_work(mocks, tmp_path):
    """A request held on each target, one of them with a large reservation: least requests
    sees three targets alike and rotates onto the large one's too; least reserved work keeps
    the next requests away from it."""
    async def run(routing: str) -> list[str]:
        async with pool_gateway([m.url for m in mocks], tmp_path, f", routing: {routing}") as gw, \
                gw.client() as client:
            held = [asyncio.ensure_future(client.post(gw.url + URL, json=chat(max_tokens=tokens),
                                                      headers={"x-mock-hold": "lr", "x-mock-tokens": "1"}))
                    for tokens in (4000, 8, 8)]
            await eventually(lambda: sum(m.held() for m in mocks) == 3)
            ids = [(await client.post(gw.url + URL, json=chat(max_tokens=8))).headers["x-request-id"]
                   for _ in range(6)]
            for mock in mocks:
                mock.release("lr")
            first = [r.headers["x-request-id"] for r in await asyncio.gather(*held)]
            records = records_by_id(gw)
            large = served_by(records[first[0]])
            return [("large" if served_by(records[i]) == large else "other") for i in ids]

    assert (await run("least_reserved")).count("large") == 0
    assert (await run("least_requests")).count("large") >= 1


async def test_weights_share_sequential_requests_in_proportion(mocks, tmp_path):
    before = [m.work() for m in mocks]
    weights = [", weight: 3", ", weight: 1", ", weight: 1"]
    async with pool_gateway([m.url for m in mocks], tmp_path, targets=weights) as gw, gw.client() as client:
        for _ in range(10):
            assert (await client.post(gw.url + URL, json=chat(max_tokens=4))).status_code == 200
    assert [m.work() - b for m, b in zip(mocks, before)] == [6, 2, 2]


async def _hold_one_each(gw, client, mocks, name: str) -> list[asyncio.Future]:
    held = [asyncio.ensure_future(client.post(gw.url + URL, json=chat(max_tokens=8), headers={"x-mock-hold": name}))
            for _ in mocks]
    await eventually(lambda: [m.held() for m in mocks] == [1, 1, 1])
    return held


async def test_every_target_at_its_cap_refuses_at_once_and_no_backend_sees_it(mocks, tmp_path):
    caps = [", max_inflight_requests: 1"] * 3
    async with pool_gateway([m.url for m in mocks], tmp_path, targets=caps) as gw, gw.client() as client:
        held = await _hold_one_each(gw, client, mocks, "cap")
        before = [m.work() for m in mocks]
        refused = await client.post(gw.url + URL, json=chat(max_tokens=8))
        assert refused.status_code == 503
        assert refused.json()["error"]["code"] == "upstream_saturated"
        assert int(refused.headers["retry-after"]) >= 1
        assert [m.work() for m in mocks] == before            # no backend saw it
        record = records_by_id(gw)[refused.headers["x-request-id"]]
        assert record["reason"] == "upstream_saturated" and record["notes"]["budget"]["actual"] == 0
        for mock in mocks:
            mock.release("cap")
        assert all(r.status_code == 200 for r in await asyncio.gather(*held))
        control = await client.post(gw.url + URL, json=chat(max_tokens=8))
        assert control.status_code == 200


async def test_a_token_cap_counts_reservations(mocks, tmp_path):
    """max_inflight_tokens: a target holding a reservation takes no second one past the cap;
    alone, a request larger than the cap is still let through (or it could never be served)."""
    caps = [", max_inflight_tokens: 5000"] * 3
    async with pool_gateway([m.url for m in mocks], tmp_path, targets=caps) as gw, gw.client() as client:
        held = [asyncio.ensure_future(client.post(gw.url + URL, json=chat(max_tokens=tokens),
                                                  headers={"x-mock-hold": "tok", "x-mock-tokens": "1"}))
                for tokens in (4000, 4000, 6000)]
        await eventually(lambda: [m.held() for m in mocks] == [1, 1, 1])
        small = await client.post(gw.url + URL, json=chat(max_tokens=500))   # fits where 4000 are held
        assert small.status_code == 200
        refused = await client.post(gw.url + URL, json=chat(max_tokens=2000))
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "upstream_saturated"
        for mock in mocks:
            mock.release("tok")
        assert [r.status_code for r in await asyncio.gather(*held)] == [200, 200, 200]


async def test_a_queue_waits_for_a_place_then_gives_up_with_an_honest_retry_after(mocks, tmp_path):
    caps = [", max_inflight_requests: 1"] * 3
    async with pool_gateway([m.url for m in mocks], tmp_path, ", queue_timeout_ms: 5000", caps) as gw, \
            gw.client() as client:
        held = await _hold_one_each(gw, client, mocks, "queue")
        before = [m.work() for m in mocks]
        waiting = asyncio.ensure_future(client.post(gw.url + URL, json=chat(max_tokens=8)))
        await asyncio.sleep(0.3)
        assert not waiting.done() and [m.work() for m in mocks] == before   # queued, on no engine
        mocks[1].release("queue")                                          # one place frees up
        served = await waiting
        assert served.status_code == 200
        assert served_by(records_by_id(gw)[served.headers["x-request-id"]]) == mocks[1].label
        for mock in mocks:
            mock.release("queue")
        await asyncio.gather(*held)
    async with pool_gateway([m.url for m in mocks], tmp_path, ", queue_timeout_ms: 300", caps) as gw, \
            gw.client() as client:
        held = await _hold_one_each(gw, client, mocks, "queue2")
        started = asyncio.get_running_loop().time()
        refused = await client.post(gw.url + URL, json=chat(max_tokens=8))
        assert asyncio.get_running_loop().time() - started >= 0.3
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "upstream_saturated"
        assert int(refused.headers["retry-after"]) >= 1
        for mock in mocks:
            mock.release("queue2")
        await asyncio.gather(*held)


def _turn(session: int, turn: int) -> dict:
    """Turn ``turn`` of an agent's session: its system prompt, the turns so far, a new one."""
    messages = [{"role": "system", "content": f"You are agent {session}. " + "Follow the plan. " * 40}]
    for earlier in range(turn):
        messages += [{"role": "user", "content": f"step {earlier} of session {session}"},
                     {"role": "assistant", "content": f"done {earlier}"}]
    messages.append({"role": "user", "content": f"step {turn} of session {session}"})
    return {"model": "small-chat", "messages": messages, "max_tokens": 8}


async def test_prefix_affinity_keeps_each_session_on_one_target_while_the_load_allows(mocks, tmp_path):
    upstream = ", routing: prefix_affinity, affinity_slack: 2000"
    async with pool_gateway([m.url for m in mocks], tmp_path, upstream) as gw, gw.client() as client:
        sent: dict[int, list[str]] = {s: [] for s in range(4)}
        for turn in range(4):                      # sessions interleaved, turn by turn
            for session in range(4):
                resp = await client.post(gw.url + URL, json=_turn(session, turn))
                assert resp.status_code == 200
                sent[session].append(resp.headers["x-request-id"])
        records = records_by_id(gw)
        for session, ids in sent.items():
            assert len({served_by(records[i]) for i in ids}) == 1, session
            assert [records[i]["notes"]["affinity"] for i in ids] == ["new", "hit", "hit", "hit"]
        assert len({served_by(records[ids[0]]) for ids in sent.values()}) == 3   # the sessions spread
        # session 0's target now holds a large reservation (its own next turn, held): past the
        # slack, the turn after goes elsewhere, and the session stays there
        home = served_by(records[sent[0][0]])
        big = {**_turn(0, 4), "max_tokens": 3000}
        held = asyncio.ensure_future(client.post(gw.url + URL, json=big, headers={"x-mock-hold": "aff"}))
        await eventually(lambda: sum(m.held() for m in mocks) == 1)
        moved = await client.post(gw.url + URL, json=_turn(0, 5))
        for mock in mocks:
            mock.release("aff")
        held_record = await record_of(gw, (await held).headers["x-request-id"])
        again = await client.post(gw.url + URL, json=_turn(0, 6))
        records = records_by_id(gw)
    assert served_by(held_record) == home and held_record["notes"]["affinity"] == "hit"
    moved_record = records[moved.headers["x-request-id"]]
    assert moved_record["notes"]["affinity"] == "moved" and served_by(moved_record) != home
    again_record = records[again.headers["x-request-id"]]
    assert again_record["notes"]["affinity"] == "hit" and served_by(again_record) == served_by(moved_record)


SALT_SECRET = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"


@pytest.mark.parametrize(("scope", "expected"), [
    # what each probe's prefix finds: another tenant's, another key's of the tenant, the
    # tenant's own under a client salt of its own
    ("off", {"other tenant": "new", "other key": "hit", "client salt": "hit"}),
    ("tenant", {"other tenant": "new", "other key": "hit", "client salt": "new"}),
    ("key", {"other tenant": "new", "other key": "new", "client salt": "new"}),
])
async def test_prefix_affinity_follows_the_cache_salt(mocks, tmp_path, monkeypatch, scope, expected):
    """Issue 42: a prefix steers only the requests the engine lets share its cache blocks, those
    carrying the same ``cache_salt``: two tenants sending one prompt are never sent after each
    other's cache; under ``key`` neither are two keys of one tenant; a client's own salt
    (folded into the gateway's) is a partition of its own. Unsalted (``off``, where a client's
    salt is dropped) a tenant's requests share, and tenants still do not."""
    monkeypatch.setenv("TOKENWARD_CACHE_SALT_SECRET", SALT_SECRET)
    upstream = f", routing: prefix_affinity, affinity_slack: 2000, cache_salt: {scope}"
    async with pool_gateway([m.url for m in mocks], tmp_path, upstream, plan=", allow_cache_salt: true",
                            tenants=("acme", "globex")) as gw, gw.client() as client:
        keys = {"acme": gw.key, "other tenant": await gw.new_key("globex"), "other key": await gw.new_key("acme")}

        async def affinity(key: str, body: dict) -> str:
            resp = await client.post(gw.url + URL, json=body, headers={"authorization": f"Bearer {key}"})
            assert resp.status_code == 200, resp.text
            return (await record_of(gw, resp.headers["x-request-id"]))["notes"]["affinity"]

        # the control: the tenant's own next turn, same key, finds its first turn's prefix
        assert [await affinity(keys["acme"], _turn(7, turn)) for turn in (0, 1)] == ["new", "hit"]
        found = {"other tenant": await affinity(keys["other tenant"], _turn(7, 1)),
                 "other key": await affinity(keys["other key"], _turn(7, 1)),
                 "client salt": await affinity(keys["acme"], {**_turn(7, 1), "cache_salt": "session-7"})}
        assert found == expected
        # and the prompt acme sent with its client salt steers its next turn with that salt
        assert await affinity(keys["acme"], {**_turn(7, 2), "cache_salt": "session-7"}) == "hit"


async def test_the_gauges_show_each_target_and_its_reserved_work(mocks, tmp_path):
    async with pool_gateway([m.url for m in mocks], tmp_path) as gw, gw.client() as client:
        held = asyncio.ensure_future(client.post(gw.url + URL, json=chat(max_tokens=700), headers={"x-mock-hold": "g"}))
        await eventually(lambda: sum(m.held() for m in mocks) == 1)
        gauges = await target_gauges(gw)
        for mock in mocks:
            mock.release("g")
        record = await record_of(gw, (await held).headers["x-request-id"])
    assert {target for _, target in gauges} == {m.label for m in mocks}
    assert all(gauges[("tokenward_upstream_target_up", m.label)] == 1 for m in mocks)
    inflight = {target: value for (name, target), value in gauges.items() if name.endswith("inflight_tokens")}
    assert inflight[served_by(record)] == record["notes"]["budget"]["reserved"]
    assert sum(inflight.values()) == record["notes"]["budget"]["reserved"]
