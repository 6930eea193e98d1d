"""OIDC/JWT bearer tokens: keys generated here, a JWKS served on loopback, tokens minted with PyJWT."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time

import jwt
import pytest
from cryptography.hazmat.primitives import serialization

from tests.identity.conftest import assert_refused, bearer, chat, run_gateway, write_config
from tests.identity.jwt_helpers import AUDIENCE, ISSUER, JwksServer, SigningKey, issuer_config
from tokenward.config.loader import parse_config
from tokenward.config.schema import JwtIssuerConfig
from tokenward.errors import ConfigError
from tokenward.identity.jwt import JwtVerifier, TokenRejected


SECRET = b"a-shared-secret-that-is-long-enough-for-hs256"


@pytest.fixture(scope="module")
def rsa_key() -> SigningKey:
    return SigningKey("rsa-1", "RSA")


@pytest.fixture(scope="module")
def ec_key() -> SigningKey:
    return SigningKey("ec-1", "EC")


@pytest.fixture
async def jwks(rsa_key, ec_key):
    server = await JwksServer(rsa_key, ec_key).start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def jwt_gw(tmp_path, backend, jwks):
    path = write_config(tmp_path, backend.port, jwt={"issuers": [issuer_config(jwks.url)]})
    async with run_gateway(path) as gw:
        yield gw


def _b64(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def _alg_none_token() -> str:
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "x", "exp": now + 300, "tenant": "acme"}
    return f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{_b64(claims)}."


def _hmac_with_public_key_token(key: SigningKey) -> str:
    """The classic confusion: HS256 'signed' with the issuer's public key as the secret."""
    pem = key.private.public_key().public_bytes(serialization.Encoding.PEM,
                                                serialization.PublicFormat.SubjectPublicKeyInfo)
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "x", "exp": now + 300, "tenant": "acme"}
    header = _b64({"alg": "HS256", "typ": "JWT", "kid": key.kid})
    signing_input = f"{header}.{_b64(claims)}".encode()
    sig = base64.urlsafe_b64encode(hmac.new(pem, signing_input, hashlib.sha256).digest()).rstrip(b"=").decode()
    return f"{signing_input.decode()}.{sig}"


def _tampered(token: str) -> str:
    header, payload, sig = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["tenant"] = "globex"
    return f"{header}.{_b64(claims)}.{sig}"


async def test_valid_tokens_rsa_and_ec_act_as_the_claimed_tenant(jwt_gw, backend, rsa_key, ec_key):
    for key in (rsa_key, ec_key):
        resp = await jwt_gw.post("/v1/chat/completions", chat("large-chat"), bearer(key.mint()))
        assert resp.status_code == 200, resp.text
    models = await jwt_gw.client.get("/v1/models", headers=bearer(ec_key.mint(claims={"tenant": "globex"})))
    assert [m["id"] for m in models.json()["data"]] == ["small-chat"]
    jwt_gw.gateway.parts.decisions.flush()
    log = (jwt_gw.config_path.parent / "decisions.jsonl").read_text()
    assert f'"key_id":"jwt:{ISSUER}:user-1"' in log and '"tenant":"acme"' in log


async def test_refused_tokens(jwt_gw, backend, rsa_key, ec_key):
    now = int(time.time())
    other_issuer_key = SigningKey("rsa-1", "EC")  # same kid, a key the issuer never published
    cases = [
        (rsa_key.mint(exp=now - 60), 401, "credentials_expired"),
        (rsa_key.mint(aud="someone-else"), 401, "invalid_credentials"),
        (rsa_key.mint(iss="https://evil.example/"), 401, "invalid_credentials"),
        (_tampered(rsa_key.mint()), 401, "invalid_credentials"),
        (_alg_none_token(), 401, "invalid_credentials"),
        (_hmac_with_public_key_token(rsa_key), 401, "invalid_credentials"),
        (other_issuer_key.mint(), 401, "invalid_credentials"),
        (rsa_key.mint(nbf=now + 600), 401, "invalid_credentials"),
        (rsa_key.mint(exp=None), 401, "invalid_credentials"),
        (rsa_key.mint(tenant=None), 401, "invalid_credentials"),
        (rsa_key.mint(tenant="no-such-tenant"), 401, "invalid_credentials"),
        (ec_key.mint(headers={"kid": rsa_key.kid}), 401, "invalid_credentials"),  # ES256 against an RSA key
        ("not.a.jwt", 401, "invalid_credentials"),
    ]
    before = await backend.requests()
    for token, status, code in cases:
        resp = await jwt_gw.post("/v1/chat/completions", chat(), bearer(token))
        await assert_refused(resp, status, code, backend, before)
    resp = await jwt_gw.post("/v1/chat/completions", chat(), bearer(rsa_key.mint()))
    assert resp.status_code == 200


async def test_rotation_to_a_new_kid_is_accepted_after_one_refetch(jwks, rsa_key):
    verifier = JwtVerifier((JwtIssuerConfig(**issuer_config(jwks.url)),))
    assert (await verifier.verify(rsa_key.mint())).tenant == "acme"
    assert jwks.fetches == 1
    rotated = SigningKey("rsa-2", "RSA")
    jwks.publish(rotated, rsa_key)
    assert (await verifier.verify(rotated.mint())).tenant == "acme"
    assert jwks.fetches == 2
    for _ in range(5):
        await verifier.verify(rotated.mint())
        await verifier.verify(rsa_key.mint())
    assert jwks.fetches == 2


async def test_unknown_kid_floods_cause_bounded_fetches(jwks, rsa_key):
    verifier = JwtVerifier((JwtIssuerConfig(**issuer_config(jwks.url, jwks_min_refetch_s=0.3)),))
    await verifier.verify(rsa_key.mint())
    assert jwks.fetches == 1
    forged = [SigningKey(f"made-up-{i}", "EC") for i in range(5)]

    async def attempt(i: int) -> None:
        with pytest.raises(TokenRejected):
            await verifier.verify(forged[i % 5].mint(headers={"kid": f"kid-{i}"}))

    started = time.monotonic()
    await asyncio.gather(*(attempt(i) for i in range(200)))
    # Concurrent unknown kids share at most one refetch.
    assert jwks.fetches == 2
    while time.monotonic() - started < 0.9:
        await asyncio.gather(*(attempt(i) for i in range(20)))
        await asyncio.sleep(0.05)
    # One refetch per 0.3 s window at most, whatever the attack rate.
    assert jwks.fetches <= 2 + 3
    # Genuine tokens keep working throughout.
    assert (await verifier.verify(rsa_key.mint())).tenant == "acme"


async def test_tenant_from_a_scope_prefix(jwks, rsa_key):
    cfg = JwtIssuerConfig(**{**issuer_config(jwks.url), "tenant_claim": None, "tenant_scope_prefix": "gw/tenant-"})
    verifier = JwtVerifier((cfg,))
    token = rsa_key.mint(claims={"scope": "openid gw/tenant-acme profile"}, tenant=None)
    assert (await verifier.verify(token)).tenant == "acme"
    token = rsa_key.mint(claims={"scp": ["gw/tenant-globex"]}, tenant=None)
    assert (await verifier.verify(token)).tenant == "globex"
    ambiguous = rsa_key.mint(claims={"scope": "gw/tenant-acme gw/tenant-globex"}, tenant=None)
    assert (await verifier.verify(ambiguous)).tenant is None
    assert (await verifier.verify(rsa_key.mint(tenant="acme"))).tenant is None  # the claim is not the source


async def test_jwks_outage_keeps_the_keys_already_known(rsa_key):
    fetches = []

    async def flaky_fetch(url: str, timeout: float) -> dict:
        fetches.append(url)
        if len(fetches) > 1:
            raise OSError("idp down")
        return {"keys": [rsa_key.jwk, {"kty": "oct", "k": base64.urlsafe_b64encode(SECRET).decode(), "kid": "hmac"}]}

    clock = [0.0]
    cfg = JwtIssuerConfig(**issuer_config("http://127.0.0.1:9/jwks", jwks_ttl_s=10, jwks_min_refetch_s=1))
    verifier = JwtVerifier((cfg,), fetch=flaky_fetch, clock=lambda: clock[0])
    assert (await verifier.verify(rsa_key.mint())).tenant == "acme"
    clock[0] = 11.0  # TTL passed, IdP down: the known key still verifies
    assert (await verifier.verify(rsa_key.mint())).tenant == "acme"
    assert len(fetches) == 2
    # A symmetric key in the JWKS is never used.
    hs = jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 60, "tenant": "acme"},
                    SECRET, algorithm="HS256", headers={"kid": "hmac"})
    with pytest.raises(TokenRejected):
        await verifier.verify(hs)


def test_config_refuses_none_and_hmac_algorithms_and_ambiguous_tenants():
    base = "jwt:\n  issuers:\n    - {issuer: i, audience: a, jwks_url: 'http://x/jwks', %s}\n"
    for bad, path in (("algorithms: [none], tenant_claim: t", "jwt.issuers[0].algorithms[0]"),
                      ("algorithms: [HS256], tenant_claim: t", "jwt.issuers[0].algorithms[0]"),
                      ("tenant_claim: t, tenant_scope_prefix: p", "jwt.issuers[issuer=i]"),
                      ("algorithms: [RS256]", "jwt.issuers[issuer=i]")):
        with pytest.raises(ConfigError) as info:
            parse_config(base % bad, {})
        assert info.value.path == path, info.value
    cfg = parse_config(base % "tenant_claim: org.id", {})
    assert cfg.jwt.issuers[0].algorithms == ("RS256", "ES256")
