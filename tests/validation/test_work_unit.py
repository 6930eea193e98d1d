"""The work stage on its own: the formula, surcharges, limits, and what it hands admission."""

from __future__ import annotations

import base64

import msgspec

from tests.validation.harness import png
from tokenward.config.schema import ModelConfig, PlanConfig
from tokenward.errors import Reason
from tokenward.pipeline.context import RequestContext
from tokenward.pipeline.results import Principal, Work
from tokenward.stages.s02_edge import Route
from tokenward.stages.s08_validation import ValidationStage
from tokenward.stages.s09_work import WorkStage
from tokenward.tokenize.counters import EstimateCounter

MODELS = {"m": ModelConfig(upstream="u", context_window=10_000)}
COUNTERS = {"m": EstimateCounter()}


async def run(path: str, body: dict, plan: PlanConfig) -> tuple[RequestContext, object]:
    ctx = RequestContext("r", "POST", path, [], None, None, 0)
    ctx.route = Route(path, ("POST",), ("application/json",), 1 << 20)
    ctx.body = msgspec.json.encode(body)
    ctx.principal = Principal(tenant="t", key_id="k", plan_name="p", plan=plan)
    refusal = await ValidationStage({"m": 1000}).admit(ctx)
    assert refusal is None, refusal and refusal.message
    return ctx, await WorkStage(MODELS, COUNTERS).admit(ctx)


async def test_completion_work_formula():
    plan = PlanConfig(max_n=3, max_output_tokens=50)
    body = {"model": "m", "prompt": ["abcd", "efghij"], "n": 3, "max_tokens": 40, "suffix": "xy"}
    ctx, refusal = await run("/v1/completions", body, plan)
    assert refusal is None
    # items x candidates x (input + output): inputs 4+2 and 6+2 bytes (estimate), 2 items.
    assert ctx.work == Work(input_tokens=14, max_output_tokens=40, outer_items=2, candidates=3, surcharge=0,
                            reserve_tokens=3 * (14 + 2 * 40), tokenizer="estimate")


async def test_chat_counts_overheads_tools_and_schema():
    plan = PlanConfig(features=("structured_output",), structured_output_surcharge=100)
    schema = {"type": "object"}
    body = {"model": "m", "max_tokens": 10,
            "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi", "name": "al"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "o", "schema": schema}}}
    ctx, refusal = await run("/v1/chat/completions", body, plan)
    assert refusal is None
    counter = COUNTERS["m"]
    expected = (counter.reply_overhead + 2 * counter.message_overhead + len("system") + len("be brief")
                + len("user") + len("hi") + counter.name_overhead + len("al") + len(msgspec.json.encode(schema)))
    assert ctx.work.input_tokens == expected
    assert ctx.work.surcharge == 100
    assert ctx.work.reserve_tokens == expected + 10 + 100


async def test_attachment_surcharge():
    plan = PlanConfig(allow_files=("image/png", "text/plain"), attachment_surcharge=7)
    image = "data:image/png;base64," + base64.b64encode(png(width=56, height=29)).decode()
    text = "data:text/plain;base64," + base64.b64encode(b"0123456789").decode()
    content = [{"type": "image_url", "image_url": {"url": image}},
               {"type": "file", "file": {"file_data": text}}]
    body = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": content}]}
    ctx, refusal = await run("/v1/chat/completions", body, plan)
    assert refusal is None
    # image: 7 + 2 x 2 patches of 28 px; text: 7 + one token per byte.
    assert ctx.work.surcharge == (7 + 4) + (7 + 10)
    assert ctx.request.attachments[0].kind == "image/png"


async def test_limits_and_params():
    # estimate: refused for context on the lower bound (bytes / 128), reserved on the upper (bytes)
    plan = PlanConfig(max_context_tokens=100, max_output_tokens=50, max_request_work=10_000, max_n=4)
    body = {"model": "m", "prompt": "x" * (50 * 128 + 1), "max_tokens": 50}
    _, refusal = await run("/v1/completions", body, plan)
    assert (refusal.reason, refusal.param) == (Reason.context_too_large, "prompt")
    assert "at least 51 prompt tokens" in refusal.message
    body = {"model": "m", "prompt": "x" * (50 * 128), "max_tokens": 50}
    ctx, refusal = await run("/v1/completions", body, plan)
    assert refusal is None and ctx.work.reserve_tokens == 50 * 128 + 50
    # chat: 8 (reply) + 8 (message) + 4 (role) + 40 = 60 input tokens; 4 x (60 + 50) = 440.
    body = {"model": "m", "messages": [{"role": "user", "content": "x" * 40}], "max_tokens": 50, "n": 4}
    plan = PlanConfig(max_context_tokens=200, max_output_tokens=50, max_request_work=439, max_n=4)
    _, refusal = await run("/v1/chat/completions", body, plan)
    assert (refusal.reason, refusal.param) == (Reason.aggregate_work_limit, "n")
    ctx, refusal = await run("/v1/chat/completions", body, msgspec.structs.replace(plan, max_request_work=440))
    assert refusal is None and ctx.work.reserve_tokens == 440


async def test_embeddings_have_no_output():
    ctx, refusal = await run("/v1/embeddings", {"model": "m", "input": ["ab", "cde"]}, PlanConfig())
    assert refusal is None
    assert (ctx.work.input_tokens, ctx.work.max_output_tokens, ctx.work.outer_items) == (5, 0, 2)
    assert ctx.work.reserve_tokens == 5
