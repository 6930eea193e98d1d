"""A backend's usage, clamped to what the request could use, and settled: whatever it
reported, a tenant's budget moves by at most the reservation, in either direction, and no
stored value goes below zero (issue 27)."""

from __future__ import annotations

import msgspec

from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.budget.helpers import NS, SCALE, bucket, reserve, settle, spend
from tokenward.budget import policy
from tokenward.budget.memory import MemoryStore
from tokenward.budget.policy import Prices
from tokenward.budget.store import Layout
from tokenward.pipeline.results import Reservation, Work
from tokenward.pipeline.bounds import answer_limit, usage_bounds
from tokenward.reconcile.usage import Usage
from tokenward.reconcile.usage_bounds import UsageBounds, clamp
from tokenward.stages.s10_admission import settle_amounts
from tokenward.pipeline.results import BudgetRecord

NOW = 1_700_000_000_000
_counts = st.one_of(st.none(), st.integers(-10**15, 10**15), st.sampled_from([0, -1, 10**12, -3_000_000]))


def _ctx(work: Work | None = None, reservation: Reservation | None = None, estimated: int | None = None,
         body: object = None) -> SimpleNamespace:
    if reservation is not None and estimated is not None:   # admission's record, on its reservation
        record = BudgetRecord(estimated_input=estimated, reserved=reservation.tokens, reserved_cost=0, limits=(),
                              store="local")
        reservation = msgspec.structs.replace(reservation, record=record)
    # validation's reading of the body: does the answer repeat the prompt (echo, prompt_logprobs)
    echoes = body is not None and (getattr(body, "echo", None) is True
                                   or type(getattr(body, "prompt_logprobs", None)) is int)
    request = SimpleNamespace(body=body, echoes_prompt=echoes) if body is not None else None
    return SimpleNamespace(work=work, reservation=reservation, notes={}, request=request)


@st.composite
def works(draw) -> Work:
    input_tokens, max_out = draw(st.integers(0, 20_000)), draw(st.integers(0, 4096))
    candidates, outer, surcharge = draw(st.integers(1, 4)), draw(st.integers(1, 4)), draw(st.integers(0, 2000))
    return Work(input_tokens=input_tokens, max_output_tokens=max_out, outer_items=outer, candidates=candidates,
                surcharge=surcharge, reserve_tokens=candidates * (input_tokens + outer * max_out) + surcharge)


@settings(max_examples=400, deadline=None)
@given(works(), _counts, _counts, st.sampled_from(["reported", "counted", "unknown"]),
       st.integers(0, 50), st.integers(0, 100), st.integers(0, 400_000), st.integers(0, 10**9))
async def test_any_reported_usage_moves_the_budget_by_at_most_the_reservation(
        work, prompt, completion, source, in_price, out_price, spent_before, spend_before):
    bounds = usage_bounds(_ctx(work))
    assert bounds.prompt + bounds.completion == work.reserve_tokens
    usage, cut = clamp(Usage(prompt, completion, source), bounds)
    for value, most in ((usage.prompt_tokens, bounds.prompt), (usage.completion_tokens, bounds.completion)):
        assert value is None or 0 <= value <= most
    assert (cut is None) == (usage == Usage(prompt, completion, source))

    prices = Prices(in_price, out_price)
    reserved = work.reserve_tokens
    reserved_cost = prices.cost(work.input_tokens, max(reserved - work.input_tokens, 0))   # as admission reserves
    capacity = 1_000_000
    store = MemoryStore()
    layout = Layout(NS, [bucket("tokens", capacity), spend("m", 10**13, NOW + 86_400_000)])
    # what the tenant had spent before this request
    await store.reserve([reserve(layout, "before", NOW, [spent_before, spend_before])])
    await store.settle([settle(layout, "before", NOW, tokens=spent_before, cost=spend_before)])
    level0, spent0 = (await store.value(layout.keys[0]))[0], await store.value(layout.keys[1]) or 0
    [out] = await store.reserve([reserve(layout, "r", NOW, [reserved, reserved_cost])])
    if not out.ok:
        return
    if usage.known:   # as the admission stage settles (stages/s10_admission.py)
        tokens, cost = settle_amounts(usage, reserved, reserved_cost, work.input_tokens, prices)
        mode = policy.SETTLE
    else:
        tokens, cost, mode = reserved, reserved_cost, policy.FULL
    await store.settle([settle(layout, "r", NOW, tokens=tokens, cost=cost, mode=mode)])
    level1, spent1 = (await store.value(layout.keys[0]))[0], await store.value(layout.keys[1]) or 0
    assert 0 <= level1 <= capacity * SCALE and spent1 >= 0
    assert 0 <= level0 - level1 <= reserved * SCALE
    assert 0 <= spent1 - spent0 <= reserved_cost


@settings(max_examples=300, deadline=None)
@given(st.integers(-10**15, 10**15), st.integers(-10**15, 10**15), st.integers(0, 10**6), st.integers(0, 10**7),
       st.integers(0, 10**6))
async def test_the_store_settles_any_amount_within_the_reservation(tokens, cost, reserved, reserved_cost, before):
    # the last line of defence, for a caller that did not clamp: policy.settle (and
    # settle.lua, held equal to it by tests/budget/test_properties.py and the contract suite)
    store = MemoryStore()
    layout = Layout(NS, [bucket("tokens", 2_000_000), spend("m", 10**13, NOW + 86_400_000)])
    await store.reserve([reserve(layout, "before", NOW, [before, before])])
    await store.settle([settle(layout, "before", NOW, tokens=before, cost=before)])
    level0, spent0 = (await store.value(layout.keys[0]))[0], await store.value(layout.keys[1]) or 0
    [out] = await store.reserve([reserve(layout, "r", NOW, [reserved, reserved_cost])])
    assert out.ok
    await store.settle([settle(layout, "r", NOW, tokens=tokens, cost=cost)])
    level1, spent1 = (await store.value(layout.keys[0]))[0], await store.value(layout.keys[1]) or 0
    assert 0 <= level0 - level1 <= reserved * SCALE
    assert 0 <= spent1 - spent0 <= reserved_cost


def test_clamp_records_what_was_cut_and_keeps_what_is_in_bounds():
    bounds = UsageBounds(100, 50)
    assert clamp(Usage(100, 50, "reported"), bounds) == (Usage(100, 50, "reported"), None)
    assert clamp(Usage(None, 7, "reported"), bounds) == (Usage(None, 7, "reported"), None)
    kept, cut = clamp(Usage(-5, 10**12, "reported"), bounds)
    assert kept == Usage(0, 50, "reported")
    assert cut == {"prompt_tokens": {"reported": -5, "bound": 100, "used": 0},
                   "completion_tokens": {"reported": 10**12, "bound": 50, "used": 50}}
    kept, cut = clamp(Usage(3, -1, "counted"), UsageBounds(None, None))     # no bound known: only the floor
    assert kept == Usage(3, 0, "counted") and cut == {"completion_tokens": {"reported": -1, "used": 0}}


def test_bounds_count_choices_outer_items_and_surcharges():
    work = Work(input_tokens=10, max_output_tokens=50, outer_items=3, candidates=2, surcharge=7,
                reserve_tokens=2 * (10 + 3 * 50) + 7)
    assert usage_bounds(_ctx(work)) == UsageBounds(2 * 10 + 7, 2 * 3 * 50)
    # no work stage: the reservation's split (prompt bytes, the rest)
    reservation = Reservation("r", "acme", 300)
    assert usage_bounds(_ctx(None, reservation, estimated=120)) == UsageBounds(120, 180)
    assert usage_bounds(_ctx()) == UsageBounds(None, None)


def test_answer_limit_is_the_output_bound_times_bytes_plus_slack():
    work = Work(input_tokens=1000, max_output_tokens=50, candidates=2, reserve_tokens=2 * (1000 + 50))
    assert answer_limit(_ctx(work), 100, 10) == 100 * 100 + 10
    # an answer that repeats its prompt may carry it too
    echo = SimpleNamespace(echo=True)
    assert answer_limit(_ctx(work, body=echo), 100, 10) == 100 * (100 + 2000) + 10
    # embeddings: no output, a vector per input item
    vectors = Work(input_tokens=30, max_output_tokens=0, outer_items=3, reserve_tokens=30)
    assert answer_limit(_ctx(vectors), 100, 10) > 3 * 100_000
    assert answer_limit(_ctx(), 100, 10) is None
