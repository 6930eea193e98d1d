"""``upstream/salt.py`` on its own: whatever JSON object a body is, and however it is spaced,
the salted body is the same object with the gateway's ``cache_salt`` first and the client's
top-level one gone (folded in); a key of that name deeper in is left alone."""

from __future__ import annotations

import hashlib
import hmac
import json

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenward.config.schema import PlanConfig
from tokenward.errors import Refusal
from tokenward.pipeline.context import RequestContext
from tokenward.pipeline.results import Principal
from tokenward.upstream.salt import CacheSalt

SECRET = b"0123456789abcdef0123456789abcdef"


def context(tenant: str = "acme", key_id: str = "key_1") -> RequestContext:
    async def nothing(*_args: object) -> None:
        return None

    ctx = RequestContext("req_1", "POST", "/v1/chat/completions", [], nothing, nothing, 0)
    ctx.principal = Principal(tenant=tenant, key_id=key_id, plan_name="team", plan=PlanConfig())
    return ctx


def expected(scope: str, subject: str, client: str | None = None) -> str:
    message = json.dumps([scope, subject, client], separators=(",", ":"), ensure_ascii=False).encode()
    return hmac.new(SECRET, message, hashlib.sha256).hexdigest()


_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=20)
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.sampled_from(["cache_salt", "a", "b"]) | st.text(max_size=8), inner,
                                         max_size=4), max_leaves=12)
_client_salts = st.none() | st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1,
                                    max_size=32)


@given(body=st.dictionaries(st.text(max_size=12).filter(lambda k: k != "cache_salt"), _values, max_size=6),
       client=_client_salts, indent=st.sampled_from([None, 0, 2]), tenant=st.text(min_size=1, max_size=12),
       scope=st.sampled_from(["tenant", "key"]))
@settings(max_examples=300, deadline=None)
def test_the_salt_goes_first_the_clients_goes_and_nothing_else_changes(body, client, indent, tenant, scope):
    sent = dict(body) if client is None else {**body, "cache_salt": client}
    raw = json.dumps(sent, indent=indent, ensure_ascii=bool(indent)).encode()
    ctx = context(tenant, key_id=f"key_{tenant}")
    salted, salt = CacheSalt(scope, SECRET).apply(raw, ctx)
    out = json.loads(salted)
    subject = tenant if scope == "tenant" else f"key_{tenant}"
    assert next(iter(out)) == "cache_salt" and out.pop("cache_salt") == expected(scope, subject, client)
    assert salt == expected(scope, subject, client).encode()   # what prefix affinity keys on
    assert out == body
    # off: a client's salt taken out, nothing added; a body without one passes as it was
    dropped, none = CacheSalt("off", None).apply(raw, ctx)
    assert json.loads(dropped) == body and (client is not None or dropped == raw) and none is None


def test_a_name_written_with_escapes_is_the_same_name():
    raw = b'{"model": "m", "cache_\\u0073alt": "evil", "x": "cache_salt"}'
    out = json.loads(CacheSalt("tenant", SECRET).apply(raw, context())[0])
    assert out == {"cache_salt": expected("tenant", "acme", "evil"), "model": "m", "x": "cache_salt"}
    assert json.loads(CacheSalt("off", None).apply(raw, context())[0]) == {"model": "m", "x": "cache_salt"}


def test_a_null_client_salt_is_no_salt_and_is_not_forwarded():
    raw = b'{"model": "m", "cache_salt": null}'
    assert json.loads(CacheSalt("off", None).apply(raw, context())[0]) == {"model": "m"}
    assert json.loads(CacheSalt("key", SECRET).apply(raw, context())[0]) == {
        "cache_salt": expected("key", "key_1"), "model": "m"}


def test_an_empty_object_and_a_body_that_is_no_object():
    salt = CacheSalt("tenant", SECRET)
    assert json.loads(salt.apply(b" { } ", context())[0]) == {"cache_salt": expected("tenant", "acme")}
    for bad in (b"[1, 2]", b'"cache_salt"', b"", b'{"cache_salt": "x"'):
        with pytest.raises(Refusal) as caught:
            salt.apply(bad, context())
        assert caught.value.reason.name == "invalid_json"


@pytest.mark.parametrize("value", ['"a\\u0000b"', '"' + "x" * 300 + '"', "42", '["a"]', '""'])
def test_a_client_salt_validation_would_refuse_is_refused_here_too(value):
    raw = b'{"model": "m", "cache_salt": ' + value.encode() + b"}"
    with pytest.raises(Refusal) as caught:
        CacheSalt("tenant", SECRET).apply(raw, context())
    assert caught.value.reason.name == "invalid_field" and caught.value.param == "cache_salt"


def test_salts_are_remembered_per_subject_and_bounded():
    salt = CacheSalt("tenant", SECRET)
    first = salt.salt(context("acme").principal)
    assert first == salt.salt(context("acme").principal) == expected("tenant", "acme").encode()
    assert salt.salt(context("acme").principal, "u1") == expected("tenant", "acme", "u1").encode()
    assert msgspec.json.decode(b'"' + first + b'"') == first.decode()
    assert salt.salt(None) == expected("tenant", "").encode()
