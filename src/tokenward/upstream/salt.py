"""``cache_salt``: the tenant's partition of an engine's prefix cache, in every body sent upstream.

vLLM's automatic prefix cache serves any request that shares a prefix with an earlier one,
whoever sent it: a tenant that sends another tenant's recent prompt gets its first token
sooner. vLLM takes ``cache_salt`` to split that cache: only requests with the same salt share
cache blocks. The gateway is the one place that knows the tenant, so with
``upstreams.NAME.cache_salt: tenant`` (or ``key``) every body it sends that upstream carries

    cache_salt = hex(HMAC-SHA256(secret, JSON ["tenant" | "key", tenant or key id, client salt or null]))

64 lowercase hex characters; the secret is the environment variable
``cache_salt_secret_env`` names (``TOKENWARD_CACHE_SALT_SECRET``), the same on every replica,
so a tenant gets the same salt whichever replica forwards its request. A start-up without
it is refused, naming the variable (``salt_for``, called when the target table is built, by
``serve`` and ``check-config`` alike).

A client's own ``cache_salt`` (a plan with ``allow_cache_salt: true``; validation has already
held it to 1-256 printable ASCII characters) is folded into the HMAC and never forwarded as
typed: two of a tenant's salts give two partitions, and no client can pick a salt that lands
in another tenant's partition. vLLM before 0.30.0 let a salt with a forbidden character or an
oversized one crash the engine core (CVE-2026-105756); with this, no client byte reaches the
field. On an upstream with ``cache_salt: off`` a client's salt is dropped (the decision record
notes it), for the same reason.

``CacheSalt.apply`` is called once, by ``upstream/prepare.py``, on the final body (chat,
completions, and native Responses / Messages bodies alike).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from typing import TYPE_CHECKING, Literal, Mapping

import msgspec
from msgspec import UNSET

from ..config.schema import Config, UpstreamConfig
from ..errors import ConfigError, Reason, Refusal
from ..wire.codec import json_encode as _encode

if TYPE_CHECKING:
    from ..pipeline.context import RequestContext
    from ..pipeline.results import Principal

MIN_SECRET_CHARS = 32
MAX_CLIENT_SALT = 256
# printable ASCII without space: what validation lets a client send (validation/schemas.py)
_CLIENT_SALT = re.compile(r"[!-~]{1,%d}" % MAX_CLIENT_SALT)
# the object's opening brace, and whether it closes at once
_OPENING = re.compile(rb"[ \t\r\n]*\{[ \t\r\n]*(\})?")
_MAX_REMEMBERED = 65_536

_members = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode


class CacheSalt:
    """One upstream's salting: ``tenant`` or ``key`` (with its secret), or ``off`` where only a
    client's own salt is taken out of the body."""

    __slots__ = ("scope", "_mac", "_salts")

    def __init__(self, scope: Literal["off", "tenant", "key"], secret: bytes | None) -> None:
        if scope != "off" and not secret:
            raise ValueError("a salting scope needs a secret")
        self.scope = scope
        self._mac = hmac.new(secret or b"-", digestmod=hashlib.sha256)
        self._salts: dict[str, bytes] = {}   # tenant or key id -> its salt without a client's

    def salt(self, principal: Principal | None, client: str | None = None) -> bytes:
        """The salt for this caller (and this client salt): 64 lowercase hex characters."""
        subject = "" if principal is None else principal.tenant if self.scope == "tenant" else principal.key_id
        if client is None:
            known = self._salts.get(subject)
            if known is not None:
                return known
        mac = self._mac.copy()
        mac.update(_encode([self.scope, subject, client]))   # JSON: no two inputs give one message
        salt = mac.hexdigest().encode()
        if client is None:
            if len(self._salts) >= _MAX_REMEMBERED:
                self._salts.clear()
            self._salts[subject] = salt
        return salt

    def apply(self, body: bytes, ctx: RequestContext) -> bytes:
        """``body`` with the gateway's ``cache_salt`` as its first member and the client's gone."""
        if _may_carry_one(body, ctx):
            return self._replace(body, ctx)
        if self.scope == "off":
            return body
        opening = _OPENING.match(body)
        if opening is None:
            raise Refusal(Reason.invalid_json, "request body must be a JSON object")
        ctx.note("cache_salt", self.scope)
        comma = b"" if opening.group(1) else b","
        start = opening.end() if opening.group(1) is None else opening.start(1)
        return b'{"cache_salt":"' + self.salt(ctx.principal) + b'"' + comma + body[start:]

    def _replace(self, body: bytes, ctx: RequestContext) -> bytes:
        try:
            members = _members(body)
        except msgspec.ValidationError:
            raise Refusal(Reason.invalid_json, "request body must be a JSON object") from None
        except msgspec.DecodeError as exc:
            raise Refusal(Reason.invalid_json, f"request body is not valid JSON: {exc}") from None
        raw = members.pop("cache_salt", None)
        if raw is None and self.scope == "off":
            return body   # the name was deeper in: nothing to take out
        client = None if raw is None else _client_salt(raw)
        if client is not None:
            ctx.note("client_cache_salt", "dropped" if self.scope == "off" else "folded")
        if self.scope != "off":
            ctx.note("cache_salt", self.scope)
            members = {"cache_salt": msgspec.Raw(b'"' + self.salt(ctx.principal, client) + b'"'), **members}
        return _encode(members)   # without the client's, even a null one


def _may_carry_one(body: bytes, ctx: RequestContext) -> bool:
    """Whether the body may hold a client's ``cache_salt``. The validated request knows (a
    native Responses or Messages body cannot: their schemas have no such field). Without it
    (a gateway built without validation) the members are read: searching the bytes would
    miss a name written with escapes (``"cache_\\u0073alt"``), which a backend reads as the same."""
    request = ctx.request
    if request is None:
        return True
    return getattr(request.body, "cache_salt", UNSET) is not UNSET


def _client_salt(raw: msgspec.Raw) -> str | None:
    """A client's salt as validation admits it (null: none); anything else is refused here too,
    for a gateway built without the validation stage."""
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        value = object()
    if value is None:
        return None
    if not isinstance(value, str) or not _CLIENT_SALT.fullmatch(value):
        raise Refusal(Reason.invalid_field, f"cache_salt must be 1 to {MAX_CLIENT_SALT} printable ASCII "
                      "characters without spaces", param="cache_salt")
    return value


def salt_for(name: str, up: UpstreamConfig, config: Config,
             environ: Mapping[str, str] | None = None) -> CacheSalt | None:
    """Upstream ``name``'s salting, its secret read from the environment now; None when it has
    nothing to do (off, and no plan lets a client send a salt). ConfigError naming the
    variable when a salting scope has no secret."""
    if up.cache_salt == "off":
        return CacheSalt("off", None) if clients_may_salt(config) else None
    where = f"upstreams.{name}.cache_salt"
    env = up.cache_salt_secret_env
    if not env:
        raise ConfigError(f"upstreams.{name}.cache_salt_secret_env", "must name an environment variable")
    secret = (os.environ if environ is None else environ).get(env, "").strip()
    if not secret:
        raise ConfigError(where, f"{up.cache_salt} needs a secret, and the environment variable {env} "
                          "is not set (the same random value on every replica: openssl rand -hex 32)")
    if len(secret) < MIN_SECRET_CHARS:
        raise ConfigError(where, f"the secret in {env} is shorter than {MIN_SECRET_CHARS} characters "
                          "(openssl rand -hex 32 makes one)")
    return CacheSalt(up.cache_salt, secret.encode())


def clients_may_salt(config: Config) -> bool:
    """Whether any plan (or tenant override) lets a client send ``cache_salt``."""
    from ..config.loader import effective_plan

    plans = [*config.plans.values(), *(effective_plan(config, t) for t in config.tenants)]
    return any(plan.allow_cache_salt or {"cache_salt", "vllm_extensions"} & set(plan.features) for plan in plans)
