"""The cache key: tenant + model + the masked request in canonical form, under a keyed hash.

The request is the body the backend would receive (masked and normalized by the stages
before), decoded and encoded again with sorted keys, so two callers whose JSON differs
only in key order or spacing meet in one entry. Fields that do not change the answer are
left out: ``stream`` and ``stream_options`` (a stream is served from a whole answer and
the other way round), ``user`` (a label), and the output limit, which the entry checks
itself (an answer that stopped by itself under 100 tokens serves a request for 200).

The canonical form comes from the validated request itself when no later stage rewrote
the body (its typed struct encodes with a fixed field order and no whitespace: no second
parse), and from the rewritten body otherwise (masked or restricted: decoded, sorted).

The key holds no text: a keyed BLAKE2b of all that under the deployment's cache secret,
prefixed by the tenant's namespace (hash-tagged), so entries never cross tenants and a
purge finds a tenant's entries by prefix.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec
from msgspec import UNSET

from ..budget.limits import tenant_namespace

_IGNORED = ("stream", "stream_options", "user", "max_tokens", "max_completion_tokens")
_decode = msgspec.json.decode
_encode_sorted = msgspec.json.Encoder(order="sorted").encode
_encode = msgspec.json.encode


def tenant_prefix(prefix: str, tenant: str) -> str:
    return tenant_namespace(prefix, tenant) + ":c:"


def cache_key(secret: bytes, prefix: str, tenant: str, body: bytes, typed: Any = None) -> tuple[str, int | None]:
    """(the key, the request's output limit). ``typed``: the validated request's struct when
    ``body`` is exactly its encoding (no stage rewrote it)."""
    if typed is not None:
        limit = _limit(getattr(typed, "max_completion_tokens", UNSET), typed.max_tokens)
        canonical = _encode(msgspec.structs.replace(typed, **{f: UNSET for f in _IGNORED if hasattr(typed, f)}))
    else:
        request = _decode(body)
        limit = request.get("max_completion_tokens") or request.get("max_tokens")
        for field in _IGNORED:
            request.pop(field, None)
        canonical = b"\1" + _encode_sorted(request)
    digest = hashlib.blake2b(tenant.encode() + b"\0" + canonical, key=secret, digest_size=20).hexdigest()
    return tenant_prefix(prefix, tenant) + digest, limit if isinstance(limit, int) else None


def _limit(completion: Any, tokens: Any) -> Any:
    return completion if isinstance(completion, int) else tokens
