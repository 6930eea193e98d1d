"""The quickstart's demo key, kept beside its SQLite key store (mode 0600) so the next start
shows the same key: only the key's hash is in the store, so this file is the only place
the plaintext can be shown again from. Reused while the store holds it active for the
demo tenant; minted anew (and the file rewritten) when missing, revoked, suspended or
expired. A PostgreSQL or in-memory key store keeps no file: a key per start.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..config.schema import Config

if TYPE_CHECKING:
    from ..keys.store import KeyStore

log = logging.getLogger("tokenward")

DEMO_KEY_FILE = ".tokenward-demo-key"


def demo_key_file(keystore_url: str) -> Path | None:
    scheme, _, rest = keystore_url.partition("://")
    if scheme.split("+", 1)[0] != "sqlite" or not rest.startswith("/"):
        return None
    path = rest[1:].split("?", 1)[0]
    if path in ("", ":memory:") or path.startswith("file:"):
        return None
    return Path(path).absolute().parent / DEMO_KEY_FILE


async def demo_key(config: Config) -> str:
    """The demo key: the saved one while it still works, else a new one (saved)."""
    from ..keys.store import open_keystore

    assert config.demo is not None
    tenant = config.demo.tenant
    where = demo_key_file(config.keystore.url)
    store = await open_keystore(config.keystore.url)
    try:
        saved = _read_key(where)
        if saved is not None and await _still_valid(store, saved, tenant):
            return saved
        plaintext, _ = await store.create(tenant, name="demo", reason="demo mode start-up", reviewer="tokenward")
    finally:
        await store.close()
    if where is not None:
        _write_key(where, plaintext)
    return plaintext


async def _still_valid(store: KeyStore, plaintext: str, tenant: str) -> bool:
    from ..keys import format as keyformat
    from ..keys.model import ACTIVE

    parsed = keyformat.parse_key(plaintext)
    if parsed is None:
        return False
    record = await store.get(parsed.key_id)
    return (record is not None and record.tenant == tenant and record.state_at(time.time()) == ACTIVE
            and keyformat.matches(parsed, bytes.fromhex(record.secret_hash)))


def _read_key(where: Path | None) -> str | None:
    if where is None:
        return None
    try:
        return where.read_text(encoding="ascii").strip() or None
    except (OSError, UnicodeError):
        return None


def _write_key(where: Path, plaintext: str) -> None:
    """Written whole or not at all (a temp file renamed), readable by its owner only."""
    temp = where.with_name(f"{where.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(plaintext + "\n")
        os.chmod(temp, 0o600)
        os.replace(temp, where)
    except OSError as exc:   # the key still works this time; it just will not be shown again
        temp.unlink(missing_ok=True)
        log.debug("demo key not kept in %s: %s", where, exc)
