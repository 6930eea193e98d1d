"""Identity: who the caller is, from a verified credential only.

``Authorization: Bearer <key or JWT>`` or ``x-api-key: <key>``. API keys (``tw_...``) are
verified against the key store through a short in-process cache; anything else shaped
like a JWT is verified against the configured OIDC issuers. ``x-tenant-id`` and every
other header or body field naming a tenant is ignored: the body's ``user`` field is kept
only as an end-user label inside the verified tenant.

Identity decides on the request head: the body is read (``s02_edge.read_body``) only after
the credential is verified, so a request without valid credentials is refused at once,
whatever its body is doing. Only then is the body's ``user`` field read.
"""

from __future__ import annotations

import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Awaitable, Callable

import msgspec

from ..config.schema import Config, PlanConfig
from ..memos import enter as enter_tenant
from ..errors import Reason, Refusal
from ..identity.apikeys import ApiKeyAuthenticator
from ..identity.jwt import JwtVerifier, TokenRejected
from ..identity.parts import IdentityParts
from ..pipeline.coroutines import is_coroutine
from ..pipeline.results import Principal
from ..pipeline.stage import BaseStage, Deciding
from ..wire.request_body import PeekFields
from .s02_edge import read_body_now

if TYPE_CHECKING:
    from ..pipeline.context import RequestContext

MISSING = Refusal(Reason.missing_credentials,
                  "no credentials: send Authorization: Bearer <API key> (or an x-api-key header)")
MALFORMED = Refusal(Reason.invalid_credentials, "invalid credentials")
CONFLICTING = Refusal(Reason.invalid_credentials, "Authorization and x-api-key carry different credentials")
# Our own server refuses these before the app runs (http/head.py); this holds under any other.
DOUBLED = Refusal(Reason.malformed_request, "more than one Authorization or x-api-key header")
MAX_END_USER_CHARS = 256
MAX_JWT_CACHE = 10_000


def _credential(headers: list[tuple[bytes, bytes]]) -> str | None | Refusal:
    bearer = api_key = None
    for name, value in headers:
        if name == b"authorization":
            if bearer is not None:
                return DOUBLED
            scheme, _, token = value.partition(b" ")
            bearer = token.strip() if scheme.lower() == b"bearer" else b""
        elif name == b"x-api-key":
            if api_key is not None:
                return DOUBLED
            api_key = value.strip()
    if bearer is not None and api_key is not None and bearer != api_key:
        return CONFLICTING
    raw = bearer if bearer is not None else api_key
    if raw is None:
        return None
    return raw.decode("latin-1") if raw else ""


def _end_user(peek: PeekFields | None) -> str | None:
    user = peek.user if peek is not None else None
    return user if isinstance(user, str) and 0 < len(user) <= MAX_END_USER_CHARS else None


class IdentityStage(BaseStage):
    name = "identity"
    needs = frozenset({"route"})
    writes = frozenset({"principal"})

    def __init__(self, api_keys: ApiKeyAuthenticator, jwt: JwtVerifier | None,
                 plans: dict[str, tuple[str, PlanConfig]], clock: Callable[[], float] = time.time) -> None:
        self.api_keys = api_keys
        self.jwt = jwt
        self._plans = plans
        self._clock = clock
        self._jwt_cache: dict[str, tuple[Principal, float]] = {}

    def decide(self, ctx: RequestContext) -> Deciding:
        credential = _credential(ctx.headers)
        if credential is None:
            return MISSING
        if type(credential) is Refusal:
            return credential
        if credential.startswith("tw_"):
            known = self.api_keys.cached(credential)   # a key read within the cache's TTL: no wait
            if known is None:
                return self._admit_after(ctx, self.api_keys.authenticate(credential))
            return self._admitted(ctx, known)
        if self.jwt is not None and credential.count(".") == 2:
            return self._admit_after(ctx, self._bearer_token(self.jwt, credential))
        return MALFORMED

    async def _admit_after(self, ctx: RequestContext, verifying: Awaitable[Principal | Refusal]) -> Refusal | None:
        decided = self._admitted(ctx, await verifying)
        return await decided if is_coroutine(decided) else decided

    def _admitted(self, ctx: RequestContext, result: Principal | Refusal) -> Coroutine[Any, Any, Refusal | None] | \
            Refusal | None:
        if type(result) is Refusal:
            return result
        ctx.principal = result
        enter_tenant(result.tenant)   # the memos this request reads and fills are its tenant's (memos.py)
        if not ctx.parsed.raw:
            reading = read_body_now(ctx)
            if reading is not None:
                return self._read_body(ctx, result, reading) if type(reading) is not Refusal else reading
        self._label(ctx, result)
        return None

    async def _read_body(self, ctx: RequestContext, principal: Principal,
                         reading: Awaitable[Refusal | None]) -> Refusal | None:
        refusal = await reading
        if refusal is not None:
            return refusal
        self._label(ctx, principal)
        return None

    @staticmethod
    def _label(ctx: RequestContext, principal: Principal) -> None:
        """The body's ``user`` field, as the end-user label inside the verified tenant."""
        if ctx.parsed.raw:
            end_user = _end_user(ctx.parsed.peek())
            if end_user is not None:
                ctx.principal = msgspec.structs.replace(principal, end_user=end_user)

    async def _bearer_token(self, jwt: JwtVerifier, token: str) -> Principal | Refusal:
        now = self._clock()
        cached = self._jwt_cache.get(token)
        if cached is not None:
            if cached[1] > now:
                return cached[0]
            del self._jwt_cache[token]
        try:
            verified = await jwt.verify(token)
        except TokenRejected as exc:
            reason = Reason.credentials_expired if exc.expired else Reason.invalid_credentials
            return Refusal(reason, str(exc))
        tenant = verified.tenant
        plan = self._plans.get(tenant) if tenant is not None else None
        if tenant is None or plan is None:
            return Refusal(Reason.invalid_credentials, "token names no configured tenant")
        principal = Principal(tenant=tenant, key_id=f"jwt:{verified.issuer}:{verified.subject}",
                              plan_name=plan[0], plan=plan[1], scopes=None, kind="jwt")
        if len(self._jwt_cache) >= MAX_JWT_CACHE:
            self._jwt_cache.clear()
        # Cached until it expires, and never longer than a minute (a removed signing key wins soon).
        self._jwt_cache[token] = (principal, min(verified.expires_at, now + 60.0))
        return principal


def build(config: Config, identity: IdentityParts) -> IdentityStage:
    jwt = JwtVerifier(config.jwt.issuers) if config.jwt.issuers else None
    return IdentityStage(identity.authenticator, jwt, identity.plans)
