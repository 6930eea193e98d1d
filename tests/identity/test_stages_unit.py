"""The two stages called directly on a built context: the cases HTTP tests cannot reach cheaply."""

from __future__ import annotations

import msgspec
import pytest

from tokenward.config.loader import effective_plan, parse_config
from tokenward.errors import Refusal
from tokenward.pipeline.context import RequestContext
from tokenward.pipeline.results import Principal
from tokenward.wire.request_body import RequestBody
from tokenward.stages.s03_identity import _credential, _end_user
from tokenward.stages.s06_entitlement import EntitlementStage

CONFIG = parse_config("""
upstreams: {local: {base_url: "http://127.0.0.1:9/v1"}}
models: {small-chat: {upstream: local}, large-chat: {upstream: local}}
plans:
  team: {models: [small-chat, large-chat], allow_tools: [search]}
  free: {models: [small-chat], allow_system_prompt: false, system_prompt: "Server prompt."}
tenants: {acme: {plan: team}, globex: {plan: free}}
""", {})


def _principal(tenant: str, scopes=None) -> Principal:
    spec = CONFIG.tenants[tenant]
    return Principal(tenant=tenant, key_id="k", plan_name=spec.plan, plan=effective_plan(CONFIG, tenant),
                     scopes=scopes)


def _ctx(body: bytes, principal: Principal | None) -> RequestContext:
    ctx = RequestContext("r", "POST", "/v1/chat/completions", [], None, None, 0)
    ctx.body = body
    ctx.principal = principal
    return ctx


@pytest.fixture
def stage() -> EntitlementStage:
    return EntitlementStage({t: effective_plan(CONFIG, t) for t in CONFIG.tenants}, frozenset(CONFIG.models))


@pytest.mark.parametrize("body", [
    b"{not json", b"[1, 2]", b'"text"', b'{"model": "large-chat", "tools": "search"}',
    b'{"model": "large-chat", "messages": {"role": "system"}}', b'{"model": "small-chat", "tools": [1]}',
    b'{"model": "large-chat", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",  # past msgspec's recursion bound
])
async def test_bodies_that_do_not_fit_the_peek_are_left_to_validation(stage, body):
    ctx = _ctx(body, _principal("globex"))
    assert await stage.admit(ctx) is None
    assert ctx.entitlement.models == frozenset({"small-chat"})
    assert ctx.body == body and ctx.parsed.version == 1   # not rewritten


async def test_a_body_without_a_model_string_is_left_to_validation(stage):
    for body in (b'{"messages": []}', b'{"model": 5}', b'{"model": null}'):
        assert await stage.admit(_ctx(body, _principal("acme"))) is None


async def test_no_body_still_decides_the_entitled_models(stage):
    ctx = _ctx(b"", _principal("acme", scopes=frozenset({"large-chat", "not-in-plan"})))
    assert await stage.admit(ctx) is None
    assert ctx.entitlement.models == frozenset({"large-chat"})
    assert await stage.admit(_ctx(b"", None)) is None  # no identity stage: nothing to decide


async def test_entitlements_are_shared_per_tenant_and_scope(stage):
    first, second = _ctx(b"", _principal("acme")), _ctx(b"", _principal("acme"))
    await stage.admit(first)
    await stage.admit(second)
    assert first.entitlement is second.entitlement


async def test_system_prompt_rewrite_sets_the_next_version_of_the_body(stage):
    body = msgspec.json.encode({"model": "small-chat", "max_tokens": 5, "messages": [
        {"role": "system", "content": "evil"}, {"role": "user", "content": "hi"}]})
    ctx = _ctx(body, _principal("globex"))
    assert await stage.admit(ctx) is None
    expected = {"model": "small-chat", "max_tokens": 5, "messages": [
        {"role": "system", "content": "Server prompt."}, {"role": "user", "content": "hi"}]}
    assert ctx.parsed.tree() == expected and ctx.parsed.version == 2
    assert ctx.body == msgspec.json.encode(expected)
    assert ctx.notes == {"system_prompt": "replaced"}
    assert ctx.entitlement.system_prompt == "Server prompt."


async def test_a_tenant_missing_from_the_start_up_table_uses_the_principals_plan(stage):
    principal = msgspec.structs.replace(_principal("acme"), tenant="late-tenant")
    ctx = _ctx(b'{"model": "large-chat"}', principal)
    assert await stage.admit(ctx) is None


def test_credentials_are_read_from_authorization_or_x_api_key_only():
    assert _credential([(b"authorization", b"Bearer tw_abc ")]) == "tw_abc"
    assert _credential([(b"authorization", b"BEARER tw_abc")]) == "tw_abc"
    assert _credential([(b"x-api-key", b"tw_abc")]) == "tw_abc"
    assert _credential([(b"authorization", b"Bearer tw_abc"), (b"x-api-key", b"tw_abc")]) == "tw_abc"
    assert isinstance(_credential([(b"authorization", b"Bearer a"), (b"x-api-key", b"b")]), Refusal)
    assert _credential([(b"authorization", b"Basic abc")]) == ""
    assert _credential([(b"x-tenant-id", b"acme"), (b"cookie", b"key=tw_abc")]) is None


def test_end_user_label_is_a_short_string_or_nothing():
    def end_user(body: bytes) -> str | None:
        return _end_user(RequestBody(body).peek())

    assert end_user(b'{"user": "alice"}') == "alice"
    assert end_user(b'{"user": 5}') is None
    assert end_user(b'{"user": "' + b"x" * 300 + b'"}') is None
    assert end_user(b"{broken") is None
    assert end_user(b'{"user": "a", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}") is None