"""memos.py: per-tenant memos under one global bound, and the tenant each request runs under."""

from __future__ import annotations

import asyncio
import contextvars

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.security.test_timing_audit import CONFIG, InProcess
from tokenward import memos
from tokenward.app import Gateway
from tokenward.config.loader import parse_config
from tokenward.mock.app import MockUpstream
from tokenward.screening.detectors import PiiScreener
from tokenward.screening.screener import Threaded
from tokenward.upstream.memory import MemoryTransport

LONG = "x" * memos.MIN_CHARS


class Counted:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, text: str) -> int:
        self.calls.append(text)
        return len(text)


_calls = st.lists(st.tuples(st.sampled_from(["acme", "globex", "initech", None]),
                            st.sampled_from(["a", "b", "c", "d"])), max_size=60)


@given(calls=_calls, entries=st.integers(1, 6))
@settings(max_examples=300, deadline=None)
def test_a_hit_is_only_ever_the_same_tenants_and_the_bound_is_global(calls, entries):
    compute = Counted()
    # a bound of `entries` entries, in bytes (a count of ~70 is a small int: nothing more to charge)
    memo = memos.TextMemo(compute, table=memos.Table(entries * memos.ENTRY_BYTES))
    kept: list[tuple[str, str]] = []          # a model of the memo: (tenant, text), least recently used first
    for tenant, letter in calls:
        text = LONG + letter
        before = len(compute.calls)
        context = contextvars.copy_context()
        context.run(memos.enter, tenant)
        assert context.run(memo, text) == len(text)
        computed = len(compute.calls) > before
        if tenant is None:
            assert computed                   # outside a request: never remembered
        else:
            assert computed == ((tenant, text) not in kept)   # hit iff this tenant sent it and it was kept
            if computed:
                if len(kept) >= entries:
                    kept.pop(0)
            else:
                kept.remove((tenant, text))   # used: the most recent again
            kept.append((tenant, text))
        assert len(memo) == len(kept) <= entries
        assert memo.tenants() == {t for t, _ in kept}


@given(calls=st.lists(st.tuples(st.sampled_from(["acme", "globex"]), st.integers(0, 2),
                                st.integers(0, 40)), max_size=80),
       budget=st.integers(0, 12 * memos.ENTRY_BYTES))
@settings(max_examples=300, deadline=None)
def test_every_memo_shares_one_bound_in_bytes(calls, budget):
    """Three memos (a count, two kinds of findings) on one table: whatever they are sent, what
    the table holds, charged by what each entry costs, stays within the bound, and the
    charge is exactly the sum of what the entries left hold."""
    table = memos.Table(budget)
    memo_list = [memos.TextMemo(len, table=table),
                 memos.TextMemo(lambda text: tuple((i, i + 1, "EMAIL") for i in range(len(text) % 5)), table=table),
                 memos.TextMemo(lambda text: (), table=table)]
    for tenant, which, n in calls:
        context = contextvars.copy_context()
        context.run(memos.enter, tenant)
        context.run(memo_list[which], LONG + "y" * n)
        assert table.bytes <= budget
        assert table.bytes == sum(memos.ENTRY_BYTES + memos.value_bytes(v) for v in table.entries.values())
    assert sum(len(m) for m in memo_list) == len(table.entries)


def test_the_configured_bound_applies_to_the_process_table():
    before = memos.held()["bound"]
    memos.configure(0)                 # what earlier tests left: out
    memos.configure(before)
    memo = memos.TextMemo(len)
    memos.enter("acme")
    try:
        for i in range(50):
            memo(LONG + str(i))
        assert len(memo) == 50
        memos.configure(memos.TABLE.bytes - 10 * memos.ENTRY_BYTES)
        assert len(memo) == 40 and memos.held()["bytes"] <= memos.held()["bound"]
    finally:
        memos.enter(None)
        memo.clear()
        memos.configure(before)


def test_short_texts_are_never_kept():
    memo = memos.TextMemo(Counted())
    memos.enter("acme")
    try:
        memo("short")
        assert len(memo) == 0
        memo(LONG)
        assert len(memo) == 1
    finally:
        memos.enter(None)


async def test_concurrent_requests_each_fill_their_own_tenants_memo():
    compute = Counted()
    memo = memos.TextMemo(compute)

    async def request(tenant: str) -> None:
        memos.enter(tenant)                  # what identity does, in the request's own task
        for _ in range(3):
            memo(LONG)
            await asyncio.sleep(0)            # the other tenants' requests run here
        assert memos.current() == tenant

    await asyncio.gather(*(request(t) for t in ("acme", "globex", "initech") * 4))
    assert len(compute.calls) == 3 and memo.tenants() == {"acme", "globex", "initech"}


async def test_a_threaded_screener_reads_its_requests_tenant():
    seen: list[str | None] = []

    class Detector:
        name = "fake"

        def find(self, text: str) -> list:
            seen.append(memos.current())
            return []

    inner = PiiScreener(Detector())
    screener = Threaded(inner)
    memos.enter("acme")
    await screener.screen([LONG])
    await screener.screen([LONG])
    memos.enter("globex")
    await screener.screen([LONG])
    assert seen == ["acme", "globex"] and inner._find.__self__.tenants() == {"acme", "globex"}


@pytest.fixture
async def gateway(tmp_path):
    built = Gateway(parse_config(CONFIG.format(tmp=tmp_path), environ={}),
                    transports={"mock": MemoryTransport(MockUpstream())})
    await built.startup()
    keys = {label: (await built.parts.keys.create(tenant))[0]
            for label, tenant in (("a", "acme"), ("b", "globex"))}
    try:
        yield built, InProcess(built, keys)
    finally:
        await built.shutdown()


async def test_through_the_gateway_one_connection_two_tenants(gateway):
    """One task serves both requests, as one keep-alive connection does: B's request misses
    what A's left, though the task's context last held A's tenant."""
    built, client = gateway
    counter = built.parts.tokenizers.counters["audit-chat"]
    encode = counter._cache._compute
    calls: list[str] = []
    counter._cache._compute = lambda text: calls.append(text) or encode(text)
    text = "a document both tenants send, long enough to be remembered " * 8
    await client.send("a", text)
    await client.send("a", text)
    assert calls.count(text) == 1                       # A's own history hits
    await client.send("b", text)
    assert calls.count(text) == 2                       # B's request counted it afresh
    assert counter._cache.tenants() == {"acme", "globex"}
    assert memos.current() == "globex"                  # until the next request clears it


def test_the_configs_default_is_the_memos_default():
    from tokenward.config.schema import MemosConfig

    assert MemosConfig().max_bytes == memos.MAX_BYTES
