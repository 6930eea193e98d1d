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
from ..validation.schemas import ChatCompletionRequest
from ..wire.request_body import RequestBody
from ..wire.codec import json_encode as _encode

# fields that do not change the answer: left out of every key (and of the semantic cache's
# shape); KeyMaker's typed path clears them by name, so keep the two in step
IGNORED = ("stream", "stream_options", "user", "max_tokens", "max_completion_tokens")
encode_sorted = msgspec.json.Encoder(order="sorted").encode

def tenant_prefix(prefix: str, tenant: str) -> str:
    return tenant_namespace(prefix, tenant) + ":c:"


class KeyMaker:
    """Cache keys under one deployment secret; each tenant's prefix and seeded keyed hash
    are worked out once."""

    def __init__(self, secret: bytes, prefix: str) -> None:
        self._hasher = hashlib.blake2b(key=secret, digest_size=20)
        self._prefix = prefix
        # tenant -> (its key prefix, the keyed hash with the tenant already fed in)
        self._tenants: dict[str, tuple[str, Any]] = {}

    def __call__(self, tenant: str, body: RequestBody | bytes, typed: Any = None) -> tuple[str, int | None]:
        """(the key, the request's output limit). ``typed``: the validated request's struct
        when ``body`` is exactly its encoding (no stage rewrote it)."""
        if typed is not None:
            # The ignored fields are cleared in place, the struct encoded, and the fields
            # put back, with nothing awaited in between: a copy of a 67-field struct with
            # msgspec.structs.replace cost 2.5K instructions more per key. Both request
            # types have the first four; chat has max_completion_tokens too.
            saved = typed.stream, typed.stream_options, typed.user, typed.max_tokens
            completion_cap = typed.max_completion_tokens if isinstance(typed, ChatCompletionRequest) else UNSET
            typed.stream = typed.stream_options = typed.user = typed.max_tokens = UNSET
            if completion_cap is not UNSET:
                typed.max_completion_tokens = UNSET
            try:
                canonical = _encode(typed)
            finally:
                typed.stream, typed.stream_options, typed.user, typed.max_tokens = saved
                if completion_cap is not UNSET:
                    typed.max_completion_tokens = completion_cap
            limit = completion_cap if isinstance(completion_cap, int) else saved[3]
        else:
            request = dict((body if isinstance(body, RequestBody) else RequestBody(body)).tree())
            limit = request.get("max_completion_tokens") or request.get("max_tokens")
            for field in IGNORED:
                request.pop(field, None)
            canonical = b"\1" + encode_sorted(request)
        known = self._tenants.get(tenant)
        if known is None:
            seeded = self._hasher.copy()
            seeded.update(tenant.encode() + b"\0")
            known = self._tenants[tenant] = (tenant_prefix(self._prefix, tenant), seeded)
        hasher = known[1].copy()
        hasher.update(canonical)
        return known[0] + hasher.hexdigest(), limit if isinstance(limit, int) else None


def cache_key(secret: bytes, prefix: str, tenant: str, body: bytes, typed: Any = None) -> tuple[str, int | None]:
    """One key, for tests and tools (the stage keeps a KeyMaker)."""
    return KeyMaker(secret, prefix)(tenant, body, typed)
