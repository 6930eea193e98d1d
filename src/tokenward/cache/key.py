"""The cache key: tenant + model + the masked request in canonical form, under a keyed hash.

The request is the body the backend would receive (masked and normalized by the stages
before), decoded and encoded again with sorted keys, so two callers whose JSON differs
only in key order or spacing meet in one entry. Fields that do not change the answer are
left out: ``stream`` and ``stream_options`` (a stream is served from a whole answer and
the other way round), ``user`` (a label), and the output limit, which the entry checks
itself (an answer that stopped by itself under 100 tokens serves a request for 200).

The key holds no text: an HMAC-SHA256 of all that under the deployment's cache key,
prefixed by the tenant's namespace (hash-tagged), so entries never cross tenants and a
purge finds a tenant's entries by prefix.
"""

from __future__ import annotations

import hashlib
import hmac

import msgspec

from ..budget.limits import tenant_namespace

_IGNORED = ("stream", "stream_options", "user", "max_tokens", "max_completion_tokens")
_decode = msgspec.json.decode
_encode = msgspec.json.Encoder(order="sorted").encode


def tenant_prefix(prefix: str, tenant: str) -> str:
    return tenant_namespace(prefix, tenant) + ":c:"


def cache_key(secret: bytes, prefix: str, tenant: str, body: bytes) -> tuple[str, int | None]:
    """(the key, the request's output limit)."""
    request = _decode(body)
    limit = request.get("max_completion_tokens") or request.get("max_tokens")
    for field in _IGNORED:
        request.pop(field, None)
    digest = hmac.new(secret, tenant.encode() + b"\0" + _encode(request), hashlib.sha256).hexdigest()
    return tenant_prefix(prefix, tenant) + digest, limit if isinstance(limit, int) else None
