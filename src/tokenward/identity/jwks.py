"""One issuer's signing keys (its JWKS), cached with a TTL and refetched on an unknown kid.

Refetches are rate-limited per issuer (at most one per ``jwks_min_refetch_s``) and
single-flight (concurrent requests share one fetch), so tokens with made-up kids cannot
turn into a fetch storm against the identity provider. Symmetric (``oct``) keys in a
JWKS are ignored: the gateway only verifies asymmetric signatures.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import urllib.request
from typing import Any, Awaitable, Callable

import jwt

from ..config.schema import JwtIssuerConfig

log = logging.getLogger("tokenward.identity")

MAX_JWKS_BYTES = 1 << 20
_KTY_FOR_ALG = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP"}

# the JWKS document as parsed JSON, whatever its shape (_usable_keys reads only what fits)
Fetch = Callable[[str, float], Awaitable[Any]]


def _fetch_sync(url: str, timeout: float) -> Any:
    if not url.startswith(("https://", "http://")):
        raise ValueError(f"jwks_url must be http(s), got {url!r}")
    request = urllib.request.Request(url, headers={"accept": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as resp:  # noqa: S310 - scheme checked above
        data = resp.read(MAX_JWKS_BYTES + 1)
    if len(data) > MAX_JWKS_BYTES:
        raise ValueError("JWKS document too large")
    return json.loads(data)


async def fetch_jwks(url: str, timeout: float) -> Any:
    # Rare (TTL expiry, key rotation): a worker thread keeps the event loop free.
    return await asyncio.to_thread(_fetch_sync, url, timeout)


def _usable_keys(document: Any) -> dict[str, dict[str, Any]]:
    keys: dict[str, dict[str, Any]] = {}
    for jwk in (document.get("keys") if isinstance(document, dict) else None) or ():
        if not isinstance(jwk, dict) or jwk.get("kty") not in ("RSA", "EC", "OKP"):
            continue
        if jwk.get("use", "sig") != "sig":
            continue
        keys[str(jwk.get("kid", ""))] = jwk
    return keys


class IssuerKeys:
    def __init__(self, cfg: JwtIssuerConfig, fetch: Fetch = fetch_jwks,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.cfg = cfg
        self._fetch = fetch
        self._clock = clock
        self._jwks: dict[str, dict[str, Any]] = {}
        self._prepared: dict[tuple[str, str], jwt.PyJWK] = {}
        self._fetched_at: float | None = None
        self._last_attempt: float | None = None
        self._last_forced: float | None = None
        self._inflight: asyncio.Task[None] | None = None
        self.fetches = 0

    async def key_for(self, kid: str, alg: str) -> jwt.PyJWK | None:
        now = self._clock()
        stale = self._fetched_at is None or now - self._fetched_at >= self.cfg.jwks_ttl_s
        if stale and (self._last_attempt is None or now - self._last_attempt >= self.cfg.jwks_min_refetch_s
                      or self._inflight is not None):
            await self._refresh()
        jwk = self._jwks.get(kid)
        if jwk is None and self._may_force(self._clock()):
            await self._refresh(forced=True)  # a rotation: the issuer may have published a new key
            jwk = self._jwks.get(kid)
        if jwk is None:
            return None
        return self._prepare(kid, jwk, alg)

    def _may_force(self, now: float) -> bool:
        """An unknown kid may force a refetch only once per ``jwks_min_refetch_s``."""
        if self._inflight is not None:
            return True  # joining a fetch in flight costs the issuer nothing
        return self._last_forced is None or now - self._last_forced >= self.cfg.jwks_min_refetch_s

    async def _refresh(self, forced: bool = False) -> None:
        if self._inflight is None:
            self._last_attempt = self._clock()
            if forced:
                self._last_forced = self._last_attempt
            self._inflight = asyncio.ensure_future(self._fetch_now())
            self._inflight.add_done_callback(self._fetch_done)
        await asyncio.shield(self._inflight)

    def _fetch_done(self, _task: asyncio.Task[None]) -> None:
        self._inflight = None

    async def _fetch_now(self) -> None:
        self.fetches += 1
        try:
            document = await self._fetch(self.cfg.jwks_url, self.cfg.fetch_timeout_s)
        except Exception as exc:
            # Keep the keys we had: an IdP outage must not log everyone out.
            log.warning("JWKS fetch from %s failed: %s", self.cfg.jwks_url, exc)
            return
        self._jwks = _usable_keys(document)
        self._prepared.clear()
        self._fetched_at = self._clock()

    def _prepare(self, kid: str, jwk: dict[str, Any], alg: str) -> jwt.PyJWK | None:
        prepared = self._prepared.get((kid, alg))
        if prepared is not None:
            return prepared
        if jwk.get("alg", alg) != alg or _KTY_FOR_ALG.get(alg[:2]) != jwk.get("kty"):
            return None  # the token asks for an algorithm this key is not for
        try:
            prepared = jwt.PyJWK(jwk, algorithm=alg)
        except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError):
            return None
        self._prepared[(kid, alg)] = prepared
        return prepared
