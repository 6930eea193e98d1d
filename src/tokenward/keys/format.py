"""The API key format and its hash: ``tw_<id>_<secret>``.

The id (64 random bits, hex) is public: it names the key in logs, audit records and the
CLI, and it is how a presented key is looked up. The secret (256 random bits, base64url)
is shown once and never stored; the store keeps a keyed SHA-256: ``SHA-256(domain NUL id
"." secret)``. A slow password hash (bcrypt, argon2) would only add CPU per request: with
256 bits of entropy there is nothing to brute-force, so one SHA-256 is the right cost.
(Not ``hmac``: with OpenSSL 3 its per-call set-up costs 3 us here, five times the hash;
length extension does not matter for a value that is only ever compared.)
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from hmac import compare_digest
from typing import Final

# Final: constants where this module is compiled (tokenward/compiled.py)
PREFIX: Final = "tw_"
ID_BYTES: Final = 8
SECRET_BYTES: Final = 32
ID_LEN: Final = 16   # ID_BYTES in hex
SECRET_LEN: Final = 43  # base64url of 32 bytes, unpadded
KEY_LEN: Final = 63   # len(PREFIX) + ID_LEN + 1 + SECRET_LEN
# Domain separation: a tokenward key hash is useless as any other hash of the same bytes.
_KEYED: Final = hashlib.sha256(b"tokenward/api-key/v1\0")
_HEX: Final = frozenset("0123456789abcdef")
assert ID_LEN == ID_BYTES * 2 and KEY_LEN == len(PREFIX) + ID_LEN + 1 + SECRET_LEN


class ParsedKey:
    __slots__ = ("key_id", "secret")

    def __init__(self, key_id: str, secret: str) -> None:
        self.key_id = key_id
        self.secret = secret


def new_key() -> tuple[str, str, str]:
    """A fresh key: (plaintext, key id, secret hash hex)."""
    key_id = secrets.token_hex(ID_BYTES)
    secret = base64.urlsafe_b64encode(secrets.token_bytes(SECRET_BYTES)).rstrip(b"=").decode()
    return f"{PREFIX}{key_id}_{secret}", key_id, hash_secret(key_id, secret).hex()


def hash_secret(key_id: str, secret: str) -> bytes:
    digest = _KEYED.copy()
    digest.update(f"{key_id}.{secret}".encode())
    return digest.digest()


def parse_key(key: str) -> ParsedKey | None:
    """Split a presented key; None if it is not shaped like one of ours."""
    if len(key) != KEY_LEN or not key.startswith(PREFIX) or key[3 + ID_LEN] != "_":
        return None
    key_id = key[3:3 + ID_LEN]
    if not _HEX.issuperset(key_id):
        return None
    return ParsedKey(key_id, key[4 + ID_LEN:])


def matches(parsed: ParsedKey, stored_hash: bytes) -> bool:
    """Constant-time comparison of a presented secret against the stored hash."""
    return compare_digest(hash_secret(parsed.key_id, parsed.secret), stored_hash)


def key_id_of(value: str) -> str | None:
    """The key id from either a bare id or a whole key (a leaked key found in a log)."""
    parsed = parse_key(value)
    if parsed is not None:
        return parsed.key_id
    value = value.strip()
    if len(value) == ID_LEN and _HEX.issuperset(value):
        return value
    return None
