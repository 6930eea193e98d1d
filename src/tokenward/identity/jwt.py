"""OIDC/JWT bearer tokens, verified in the gateway itself whatever sits in front of it.

Signature (against the issuer's cached JWKS), issuer, audience, expiry and not-before
are all checked here. ``alg: none`` and HMAC algorithms are refused before any key is
looked at, a token's ``alg`` must be one its issuer is configured for, and the key must
be of the matching type: a public key can never be used as an HMAC secret.

The tenant comes from the verified token only: a claim, or a scope with a prefix.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import jwt

from ..config.schema import JwtIssuerConfig
from .jwks import Fetch, IssuerKeys, fetch_jwks

_ASYMMETRIC = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512",
                         "EdDSA"})


class TokenRejected(Exception):
    """A token that does not verify; ``expired`` tells credentials_expired apart."""

    def __init__(self, message: str, expired: bool = False) -> None:
        super().__init__(message)
        self.expired = expired


class VerifiedToken:
    __slots__ = ("issuer", "subject", "tenant", "expires_at", "claims")

    def __init__(self, issuer: str, subject: str, tenant: str | None, expires_at: float, claims: dict[str, Any]) -> None:
        self.issuer = issuer
        self.subject = subject
        self.tenant = tenant
        self.expires_at = expires_at
        self.claims = claims


def _claim(claims: dict[str, Any], path: str) -> Any:
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _scopes(claims: dict[str, Any]) -> list[str]:
    scopes: list[str] = []
    for name in ("scope", "scp"):
        value = claims.get(name)
        if isinstance(value, str):
            scopes.extend(value.split())
        elif isinstance(value, list):
            scopes.extend(s for s in value if isinstance(s, str))
    return scopes


def tenant_of(cfg: JwtIssuerConfig, claims: dict[str, Any]) -> str | None:
    if cfg.tenant_claim is not None:
        value = _claim(claims, cfg.tenant_claim)
        return value if isinstance(value, str) and value else None
    prefix = cfg.tenant_scope_prefix or ""
    tenants = {s[len(prefix):] for s in _scopes(claims) if s.startswith(prefix) and len(s) > len(prefix)}
    # Two tenant scopes in one token is ambiguous: better no identity than a guessed one.
    return tenants.pop() if len(tenants) == 1 else None


class Issuer:
    def __init__(self, cfg: JwtIssuerConfig, fetch: Fetch, clock: Callable[[], float]) -> None:
        self.cfg = cfg
        self.keys = IssuerKeys(cfg, fetch, clock)
        self.algorithms = frozenset(cfg.algorithms) & _ASYMMETRIC


class JwtVerifier:
    def __init__(self, issuers: tuple[JwtIssuerConfig, ...], fetch: Fetch = fetch_jwks,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.issuers = {cfg.issuer: Issuer(cfg, fetch, clock) for cfg in issuers}

    async def verify(self, token: str) -> VerifiedToken:
        try:
            header = jwt.get_unverified_header(token)
            unverified = jwt.decode(token, options={"verify_signature": False})
        except jwt.InvalidTokenError:
            raise TokenRejected("malformed token") from None
        alg = header.get("alg")
        if alg not in _ASYMMETRIC:
            raise TokenRejected(f"token algorithm {alg!r} is not accepted")
        iss = unverified.get("iss")
        issuer = self.issuers.get(iss) if isinstance(iss, str) else None
        if issuer is None:
            raise TokenRejected("token issuer is not trusted")
        if alg not in issuer.algorithms:
            raise TokenRejected(f"token algorithm {alg} is not accepted for this issuer")
        kid = header.get("kid", "")
        key = await issuer.keys.key_for(kid if isinstance(kid, str) else "", alg)
        if key is None:
            raise TokenRejected("token signing key is unknown")
        cfg = issuer.cfg
        try:
            claims = jwt.decode(token, key=key, algorithms=[alg], audience=cfg.audience, issuer=cfg.issuer,
                                leeway=cfg.leeway_s, options={"require": ["exp", "iss", "aud"]})
        except jwt.ExpiredSignatureError:
            raise TokenRejected("token has expired", expired=True) from None
        except jwt.InvalidTokenError as exc:
            raise TokenRejected(f"token rejected: {_reason(exc)}") from None
        subject = claims.get("sub") or claims.get("azp") or claims.get("client_id") or "-"
        return VerifiedToken(cfg.issuer, str(subject), tenant_of(cfg, claims), float(claims["exp"]), claims)


def _reason(exc: jwt.InvalidTokenError) -> str:
    if isinstance(exc, jwt.InvalidAudienceError):
        return "wrong audience"
    if isinstance(exc, jwt.InvalidIssuerError):
        return "wrong issuer"
    if isinstance(exc, jwt.ImmatureSignatureError):
        return "not valid yet"
    if isinstance(exc, jwt.InvalidSignatureError):
        return "bad signature"
    if isinstance(exc, jwt.MissingRequiredClaimError):
        return f"missing claim {exc.claim}"
    return "invalid token"
