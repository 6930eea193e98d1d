"""Network prefixes under a keyed hash: a /24 of IPv4, a /48 of IPv6, never the address.

The hash is BLAKE2b keyed with the deployment's secret, so a prefix cannot be recovered
by hashing all 2^24 of them without that secret. Every replica must share the secret to
agree on which networks a key has used (secret.py).
"""

from __future__ import annotations

import enum
import hashlib
import ipaddress
from typing import Final

V4_PREFIX, V6_PREFIX = 24, 48
_V4_MASK = (1 << 32) - (1 << (32 - V4_PREFIX))
_V6_MASK = (1 << 128) - (1 << (128 - V6_PREFIX))


class _Miss(enum.Enum):
    MISS = "miss"


_MISS: Final = _Miss.MISS   # not in the cache (None is a cached answer: not an address)


def prefix_bytes(address: str) -> bytes | None:
    """The network prefix of an address as bytes (``4:`` + 3 bytes, ``6:`` + 6 bytes); None
    when it is not an address. An IPv4-mapped IPv6 address counts as IPv4."""
    try:
        ip = ipaddress.ip_address(address.strip().strip("[]"))
    except ValueError:
        return None
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.version == 4:
        return b"4:" + (int(ip) & _V4_MASK).to_bytes(4, "big")[:3]
    return b"6:" + (int(ip) & _V6_MASK).to_bytes(16, "big")[:6]


class NetworkHasher:
    """Keyed prefix hashes, remembered per address seen (bounded) so a busy batch hashes
    each client once."""

    def __init__(self, secret: bytes, max_cached: int = 65_536) -> None:
        self._secret = secret
        self._cache: dict[str, str | None] = {}
        self._max = max_cached

    def of(self, address: str | None) -> str | None:
        if not address:
            return None
        cached = self._cache.get(address, _MISS)
        if cached is not _MISS:
            return cached
        prefix = prefix_bytes(address)
        value = None
        if prefix is not None:
            value = hashlib.blake2b(prefix, key=self._secret, digest_size=8, person=b"tw-net").hexdigest()
        if len(self._cache) >= self._max:
            self._cache.clear()
        self._cache[address] = value
        return value


def client_address(header_value: bytes | None) -> str | None:
    """The client's address from a proxy header: the first entry of ``X-Forwarded-For``
    style lists (``for=`` of ``Forwarded`` accepted too)."""
    if not header_value:
        return None
    first = header_value.split(b",", 1)[0].strip().decode("latin-1")
    if first.lower().startswith("for="):
        first = first[4:].strip('"')
        if first.startswith("[") and "]" in first:
            return first[1:first.index("]")]
    if first.count(":") == 1 and "." in first:   # "1.2.3.4:5678"
        first = first.split(":", 1)[0]
    return first or None
