"""The pool's arithmetic without a network: routing (properties), caps, the queue, ejection
and its back-off, panic, readmission by a probe, prefix chains."""

from __future__ import annotations

import asyncio
from collections import Counter
from types import SimpleNamespace

import pytest
from hypothesis import given, settings, strategies as st

from tokenward.config.schema import UpstreamConfig
from tokenward.errors import Refusal
from tokenward.upstream import routing
from tokenward.upstream.affinity import AffinityTable, affinity_seed, prefix_chain
from tokenward.upstream.pool import BackendPool, Replica
from tokenward.validation.schemas import AssistantMessage, ChatCompletionRequest, SystemMessage, UserMessage


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class NoTransport:
    stats = {"open": 0, "idle": 0, "waiting": 0}

    async def aclose(self) -> None:
        return None


def make_pool(weights=(1, 1, 1), caps=None, clock=None, **up) -> BackendPool:
    caps = caps or [(None, None)] * len(weights)
    replicas = [Replica(f"10.0.0.{i}:8000", f"http://10.0.0.{i}:8000/v1", NoTransport(), w, *cap)
                for i, (w, cap) in enumerate(zip(weights, caps))]
    return BackendPool("engines", UpstreamConfig(base_url="http://x/v1", **up), replicas, clock or Clock())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=1, max_size=5))
def test_rotation_gives_each_its_weight_in_every_cycle(weights):
    """Smooth weighted round robin: over sum(weights) picks, each is picked its weight times."""
    pool = make_pool(tuple(weights))
    picks = Counter(routing.rotate(pool.replicas).label for _ in range(sum(weights) * 3))
    assert [picks[r.label] for r in pool.replicas] == [3 * w for w in weights]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5), st.integers(0, 10_000)), min_size=1, max_size=5))
def test_least_reserved_picks_a_least_loaded_target(spec):
    pool = make_pool(tuple(w for w, _ in spec))
    for replica, (_, tokens) in zip(pool.replicas, spec):
        replica.tokens = tokens
    chosen = routing.least_reserved(pool.replicas)
    assert routing.reserved_load(chosen) == min(routing.reserved_load(r) for r in pool.replicas)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 3000), min_size=1, max_size=40))
def test_in_flight_counts_return_to_zero(reservations):
    """Whatever is taken and given back, in any order, leaves nothing counted."""
    pool = make_pool(caps=[(3, 4000)] * 3)
    taken = []
    for tokens in reservations:
        replica = pool.take(tokens)
        if replica is not None:
            taken.append((replica, tokens))
            assert replica.requests <= 3 and (replica.tokens <= 4000 or replica.requests == 1)
    for replica, tokens in reversed(taken):
        pool.release(replica, tokens)
    assert all(r.requests == 0 and r.tokens == 0 for r in pool.replicas)


def test_caps_refuse_with_a_retry_after_and_let_a_lone_large_request_through():
    pool = make_pool(caps=[(1, 100)] * 2, weights=(1, 1))
    big = pool.take(500)
    assert big is not None                               # alone on an idle target
    other = pool.take(50)
    assert other is not None and other is not big
    assert pool.take(10) is None
    with pytest.raises(Refusal) as info:
        asyncio.run(pool.wait_turn(10))
    assert info.value.reason.name == "upstream_saturated"
    assert int(dict(info.value.headers)[b"retry-after"]) >= 1


async def test_the_queue_is_first_come_first_served_bounded_and_a_cancelled_waiter_gives_its_place_back():
    pool = make_pool(caps=[(1, None)] * 3, queue_timeout_ms=5000)
    held = [pool.take(10) for _ in range(3)]
    waiters = [asyncio.ensure_future(pool.wait_turn(10)) for _ in range(4)]
    await asyncio.sleep(0)
    assert isinstance(waiters[3].exception(), Refusal)   # as many wait as the targets run at once
    waiters[0].cancel()
    await asyncio.sleep(0)
    pool.release(held[0], 10)
    await asyncio.sleep(0)
    assert waiters[1].done() and not waiters[2].done()
    pool.release(waiters[1].result(), 10)
    await asyncio.sleep(0)
    assert waiters[2].done()
    pool.release(waiters[2].result(), 10)
    for replica in held[1:]:
        pool.release(replica, 10)
    assert all(r.requests == 0 and r.tokens == 0 for r in pool.replicas)


def test_ejection_backs_off_doubling_and_every_target_ejected_is_panic():
    clock = Clock()
    pool = make_pool(weights=(1, 1), clock=clock, eject_after=2, eject_base_s=5, eject_max_s=12)
    a, b = pool.replicas
    for back_off in (5, 10, 12):
        pool.failed(a, "unreachable")
        assert a.admitted(clock.now)
        pool.failed(a, "unreachable")
        assert not a.admitted(clock.now) and a.ejected_until == clock.now + back_off
        assert all(pool.take(0) is b for _ in range(3))           # only b, while a is out
        clock.now += back_off
        assert a.admitted(clock.now)
    for _ in range(2):
        pool.failed(b, "timed out")
        pool.failed(a, "timed out")
    assert not a.admitted(clock.now) and not b.admitted(clock.now)
    assert {pool.take(0).label for _ in range(4)} == {a.label, b.label}   # panic: both again


def test_a_passing_probe_sent_after_the_ejection_readmits_at_once():
    clock = Clock()
    pool = make_pool(weights=(1, 1), clock=clock, eject_after=1, eject_base_s=30)
    a = pool.replicas[0]
    pool.failed(a, "unreachable")
    pool.probed(a, True, clock.now - 1, "ok")          # sent before the ejection: not evidence
    assert not a.admitted(clock.now)
    clock.now += 1
    pool.probed(a, True, clock.now - 0.5, "ok")
    assert a.admitted(clock.now) and pool.healthy(a)


def test_failing_probes_eject_and_keep_out_while_probed_in_the_background():
    clock = Clock()
    pool = make_pool(weights=(1, 1), clock=clock, eject_after=2, eject_base_s=1)
    pool.probe_every_s = 2.0
    a = pool.replicas[0]
    pool.probed(a, False, clock.now, "timed out")
    pool.probed(a, False, clock.now, "timed out")
    assert not a.admitted(clock.now)
    clock.now += 1.5                                    # past its back-off, but the probe still fails
    pool.probed(a, False, clock.now, "timed out")
    assert not a.admitted(clock.now + 1)


def _ctx(tenant: str, messages: list[object]) -> SimpleNamespace:
    body = ChatCompletionRequest(model="m", messages=messages)
    return SimpleNamespace(request=SimpleNamespace(body=body), principal=SimpleNamespace(tenant=tenant))


def test_an_agents_next_turn_shares_its_previous_prefix_and_tenants_never_share():
    system, u1, a1, u2 = (SystemMessage(content="sys"), UserMessage(content="q1"), AssistantMessage(content="a1"),
                          UserMessage(content="q2"))
    turn1 = _ctx("acme", [system, u1])
    turn2 = _ctx("acme", [system, u1, a1, u2])
    chain1 = prefix_chain(turn1, affinity_seed(turn1))
    chain2 = prefix_chain(turn2, affinity_seed(turn2))
    assert chain2[:2] == chain1 and len(chain2) == 4
    other = _ctx("globex", [system, u1])
    assert not set(prefix_chain(other, affinity_seed(other))) & set(chain1)
    table: AffinityTable[str] = AffinityTable()
    table.record(chain1, "a")
    assert table.holder(chain2) == "a" and table.holder(prefix_chain(other, affinity_seed(other))) is None


def test_a_cache_salt_seeds_the_chain_with_the_tenant():
    """Two keys of one tenant under ``cache_salt: key`` (two salts) never share a prefix, nor
    does a salted request with an unsalted one; one salt is one chain for its tenant, and
    two tenants never share one, even with the same salt (which the HMAC never gives)."""
    system, user = SystemMessage(content="sys"), UserMessage(content="q1")
    ctx = _ctx("acme", [system, user])
    by_tenant = prefix_chain(ctx, affinity_seed(ctx))
    one, two = (prefix_chain(ctx, affinity_seed(ctx, salt)) for salt in (b"a" * 64, b"b" * 64))
    assert not set(one) & set(two) and not set(one) & set(by_tenant)
    assert prefix_chain(_ctx("acme", [system, user]), affinity_seed(ctx, b"a" * 64)) == one
    other = _ctx("globex", [system, user])
    assert not set(prefix_chain(other, affinity_seed(other, b"a" * 64))) & set(one)
