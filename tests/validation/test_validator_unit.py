"""The validator and the validation stage without a network: decisions, and what the stage
leaves on the context (body bytes untouched unless changed, payload, result, notes)."""

from __future__ import annotations

import binascii

import msgspec
import pytest

from tokenward.config.schema import PlanConfig
from tokenward.errors import Reason, Refusal
from tokenward.pipeline.context import RequestContext
from tokenward.pipeline.results import Entitlement, Principal
from tokenward.stages.s02_edge import Route
from tokenward.stages.s08_validation import ValidationStage
from tokenward.validation import media
from tokenward.validation.request import Validator
from tokenward.validation.structured import _costly_regex

CHAT, COMPLETIONS, EMBEDDINGS = "/v1/chat/completions", "/v1/completions", "/v1/embeddings"
VALIDATOR = Validator({"m": 1000})
PLAN = PlanConfig(max_n=2)


def check(path: str, body: dict | bytes, plan: PlanConfig = PLAN, features: tuple[str, ...] = ()):
    raw = body if isinstance(body, bytes) else msgspec.json.encode(body)
    return VALIDATOR.validate(path, raw, plan, frozenset(features))


def refused(path: str, body: dict | bytes, plan: PlanConfig = PLAN, features: tuple[str, ...] = ()) -> Refusal:
    with pytest.raises(Refusal) as info:
        check(path, body, plan, features)
    return info.value


def chat(**extra) -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, **extra}


def test_unknown_model():
    error = refused(CHAT, {**chat(), "model": "nope"})
    assert (error.reason, error.param) == (Reason.unknown_model, "model")


def test_deeper_than_the_decoder_recursion_bound_is_json_too_deep():
    raw = (b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 4, '
           b'"tools": [{"type": "function", "function": {"name": "t", "parameters": '
           + b"[" * 100_000 + b"]" * 100_000 + b"}}]}")
    assert refused(CHAT, raw).reason is Reason.json_too_deep


def test_best_of_needs_the_plan():
    body = {"model": "m", "prompt": "x", "max_tokens": 4, "best_of": 2}
    error = refused(COMPLETIONS, body)
    assert (error.reason, error.param) == (Reason.best_of_denied, "best_of")
    assert check(COMPLETIONS, {**body, "best_of": 1}).candidates == 1
    allowed = PlanConfig(allow_best_of=True, max_best_of=3, max_n=2)
    assert check(COMPLETIONS, {**body, "best_of": 3}, allowed).candidates == 3
    assert refused(COMPLETIONS, {**body, "best_of": 4}, allowed).reason is Reason.best_of_denied


def test_extension_gates():
    error = refused(CHAT, chat(top_k=5))
    assert (error.reason, error.param) == (Reason.feature_not_entitled, "top_k")
    assert check(CHAT, chat(top_k=5), features=("top_k",))
    assert check(CHAT, chat(top_k=5), features=("vllm_extensions",))
    assert check(CHAT, chat(top_k=None))  # an explicit null sets nothing
    assert check(CHAT, chat(kv_transfer_params=None))
    # Regex-style constraints need their own name, whatever else is enabled, unless the
    # gateway can show the regex is cheap to compile (validation/regex_cost.py).
    costly = "(a|b)*a(a|b){20}"      # its DFA has over a million states
    error = refused(CHAT, chat(guided_regex=costly), features=("vllm_extensions",))
    assert (error.reason, error.param) == (Reason.structured_output_denied, "guided_regex")
    assert "more than 64 states" in error.message
    assert check(CHAT, chat(guided_regex=costly), features=("guided_regex",)).structured_output
    assert check(CHAT, chat(guided_regex="a+"), features=("vllm_extensions",)).structured_output
    error = refused(CHAT, chat(guided_regex="a+"))   # the field itself is still a vLLM extension
    assert (error.reason, error.param) == (Reason.structured_output_denied, "guided_regex")
    error = refused(CHAT, chat(structured_outputs={"grammar": "root ::= x"}), features=("vllm_extensions",))
    assert error.param == "structured_outputs.grammar"
    error = refused(EMBEDDINGS, {"model": "m", "input": "x", "priority": 1})
    assert error.param == "priority"


def test_json_schema_needs_structured_output():
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}
    error = refused(CHAT, chat(response_format=fmt))
    assert (error.reason, error.param) == (Reason.structured_output_denied, "response_format")
    result = check(CHAT, chat(response_format=fmt), features=("structured_output",))
    assert result.structured_output


def test_regex_walk_reads_schemas_as_schemas():
    costly = "(a+)+"
    assert _costly_regex({"properties": {"pattern": {"type": "string"}}}) is None
    assert _costly_regex({"enum": [{"pattern": costly}], "const": {"pattern": costly}}) is None
    assert _costly_regex({"default": {"patternProperties": {costly: {}}}}) is None
    assert _costly_regex({"items": [{"type": "string", "pattern": "a+"}]}) is None        # cheap
    assert _costly_regex({"items": [{"type": "string", "pattern": costly}]})[0] == "items[0].pattern"
    assert _costly_regex({"$defs": {"a": {"patternProperties": {costly: {}}}}})[0] == (
        "$defs.a.patternProperties.(a+)+")
    assert _costly_regex({"patternProperties": {"^x": {"pattern": costly}}})[0] == "patternProperties.^x.pattern"
    # Claude Code's Workflow tool (tests/fixtures/agents): admitted on any plan
    assert _costly_regex({"properties": {"id": {"type": "string", "pattern": "^wf_[a-z0-9-]{6,}$"}}}) is None


def test_guided_json_as_a_json_string_is_checked_too():
    features = ("vllm_extensions",)
    assert check(CHAT, chat(guided_json='{"type": "object"}'), features=features)
    error = refused(CHAT, chat(guided_json='{"type": "string", "pattern": "(a+)+"}'), features=features)
    assert error.reason is Reason.structured_output_denied
    assert check(CHAT, chat(guided_json='{"type": "string", "pattern": "a"}'), features=features)


def test_oversized_payload_is_refused_without_decoding(monkeypatch):
    def explode(*_args, **_kwargs):
        raise AssertionError("decoded before the size check")

    monkeypatch.setattr(binascii, "a2b_base64", explode)
    url = "data:image/png;base64," + "A" * 100_000
    body = chat(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}])
    error = refused(CHAT, body, PlanConfig(max_attachment_bytes=1000, allow_files=("image/png",)))
    assert error.reason is Reason.attachment_rejected


def test_completion_prompt_shapes_and_prompt_embeds():
    assert check(COMPLETIONS, {"model": "m", "prompt": [[1, 2], [3]], "max_tokens": 4}).outer_items == 2
    error = refused(COMPLETIONS, {"model": "m", "max_tokens": 4})
    assert (error.reason, error.param) == (Reason.invalid_field, "prompt")
    embeds = {"model": "m", "prompt_embeds": ["AAAA", "AAAA"], "max_tokens": 4}
    result = check(COMPLETIONS, embeds, features=("prompt_embeds",))
    assert result.outer_items == 2 and result.embed_tokens == (1, 1)


def _ctx(body: bytes, path: str = CHAT, plan: PlanConfig | None = None) -> RequestContext:
    ctx = RequestContext("r1", "POST", path, [], None, None, 0)
    ctx.route = Route(path, ("POST",), ("application/json",), 1 << 20)
    ctx.body = body
    if plan is not None:
        ctx.principal = Principal(tenant="t", key_id="k", plan_name="p", plan=plan)
    return ctx


async def test_stage_leaves_an_unchanged_body_alone():
    stage = ValidationStage({"m": 1000})
    body = b'{"model":"m", "messages":[{"role":"user","content":"hi"}], "max_tokens":4, "x_order":1}'
    ctx = _ctx(body.replace(b', "x_order":1', b""))
    original = ctx.body
    assert await stage.admit(ctx) is None
    assert ctx.body is original and ctx.parsed.version == 1   # not re-encoded
    assert ctx.request.model == "m" and ctx.model == "m" and ctx.notes is None


async def test_stage_re_encodes_a_changed_body():
    stage = ValidationStage({"m": 1000})
    body = msgspec.json.encode({"model": "m", "messages": [{"role": "user", "content": "ｈｉ\u200b"}],
                                "max_tokens": 99_999, "temperature": None, "stream": True})
    ctx = _ctx(body, plan=PlanConfig(max_output_tokens=10))
    assert await stage.admit(ctx) is None
    assert msgspec.json.decode(ctx.body) == {"model": "m", "messages": [{"role": "user", "content": "hi"}],
                                             "max_tokens": 10, "temperature": None, "stream": True}
    assert ctx.stream is True
    assert ctx.notes == {"hidden_characters": 1, "normalized_texts": 1, "clamped": {"max_tokens": 99_999}}


async def test_stage_reads_the_entitlement_plan_first_and_refuses():
    stage = ValidationStage({"m": 1000})
    ctx = _ctx(msgspec.json.encode(chat(n=3)), plan=PlanConfig(max_n=5))
    ctx.entitlement = Entitlement(models=frozenset({"m"}), plan=PlanConfig(max_n=2))
    refusal = await stage.admit(ctx)
    assert refusal is not None and refusal.reason is Reason.choices_limit
    assert ctx.request is None


async def test_stage_skips_routes_without_a_body_schema():
    stage = ValidationStage({"m": 1000})
    ctx = _ctx(b"", path="/v1/models")
    assert await stage.admit(ctx) is None and ctx.request is None


def test_media_sniffing_ignores_declared_type():
    assert media.sniff(b"%PDF-1.4 rest") == "application/pdf"
    assert media.sniff(b"RIFF\x00\x00\x00\x00WAVEfmt ") == "audio/wav"
    assert media.sniff(b"ID3\x03") == "audio/mpeg"
    assert media.sniff(b"\xff\xd8\xff\xe0") == "image/jpeg"
    assert media.sniff(b"hello\nworld") == "text/plain"
    assert media.sniff(b"\x00\x01binary") is None
    assert media.allowed("image/png", ("image/*",)) and not media.allowed("image/png", ("text/plain",))
