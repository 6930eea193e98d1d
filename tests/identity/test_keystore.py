"""The key store contract, run on SQLite and on a real PostgreSQL started by the fixture."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from tokenward.keys import KeyNotFound, KeyStateError, open_keystore
from tokenward.keys import format as keyformat
from tokenward.keys.model import ACTIVE, EXPIRED, REVOKED, SUSPENDED, parse_duration
from tokenward.keys.store import engine_url


@pytest.fixture(params=["sqlite", "postgresql"])
def keystore_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/keys.db"
    server = request.getfixturevalue("postgres_server")
    return server.new_database()


@pytest.fixture
async def store(keystore_url):
    store = await open_keystore(keystore_url)
    try:
        yield store
    finally:
        await store.close()


async def test_create_returns_the_key_once_and_stores_only_a_hash(store):
    plaintext, record = await store.create("acme", name="ci", models=["small-chat"], reason="ci bot", reviewer="ops")
    parsed = keyformat.parse_key(plaintext)
    assert parsed is not None and parsed.key_id == record.id
    assert record.secret_hash == keyformat.hash_secret(record.id, parsed.secret).hex()
    assert parsed.secret not in record.secret_hash
    fetched = await store.get(record.id)
    assert fetched == record
    assert fetched.models == ("small-chat",) and fetched.environments is None
    assert fetched.state_at(time.time()) == ACTIVE
    assert keyformat.matches(parsed, bytes.fromhex(fetched.secret_hash))
    wrong = keyformat.ParsedKey(record.id, parsed.secret[:-1] + ("A" if parsed.secret[-1] != "A" else "B"))
    assert not keyformat.matches(wrong, bytes.fromhex(fetched.secret_hash))


async def test_lifecycle_and_its_audit_trail(store):
    _, record = await store.create("acme", name="bob", reviewer="ops")
    t0 = time.time()
    suspended = await store.suspend(record.id, duration_s=3600, reason="anomaly", reviewer="alice")
    assert suspended.status == SUSPENDED and suspended.suspended_until >= t0 + 3599
    assert (await store.get(record.id)).state_at(time.time()) == SUSPENDED
    # A suspension ends by itself once its time has passed.
    assert suspended.state_at(suspended.suspended_until + 1) == ACTIVE
    reinstated = await store.reinstate(record.id, reason="false alarm", reviewer="bob")
    assert reinstated.status == ACTIVE and reinstated.suspended_until is None
    revoked = await store.revoke(record.id, reason="leaked in a log", reviewer="carol")
    assert (await store.get(record.id)).state_at(time.time()) == REVOKED == revoked.status
    trail = await store.audit(record.id)
    assert [a.action for a in trail] == ["create", "suspend", "reinstate", "revoke"]
    suspend = trail[1]
    assert (suspend.reason, suspend.reviewer, suspend.duration_s, suspend.scope) == \
        ("anomaly", "alice", 3600.0, f"key:{record.id}")
    assert all(a.tenant == "acme" and a.at >= t0 - 5 for a in trail)
    assert (trail[3].reason, trail[3].reviewer) == ("leaked in a log", "carol")


async def test_state_errors_and_unknown_keys(store):
    _, record = await store.create("acme")
    with pytest.raises(KeyStateError):
        await store.reinstate(record.id, reason="not suspended")
    await store.revoke(record.id, reason="x")
    with pytest.raises(KeyStateError):
        await store.revoke(record.id, reason="twice")
    with pytest.raises(KeyStateError):
        await store.suspend(record.id, duration_s=60, reason="revoked already")
    with pytest.raises(KeyNotFound):
        await store.revoke("0123456789abcdef", reason="x")
    assert await store.get("0123456789abcdef") is None
    # Failed changes leave no audit record.
    assert [a.action for a in await store.audit(record.id)] == ["create", "revoke"]


async def test_expiry_list_and_batched_last_used(store):
    _, old = await store.create("acme", expires_at=time.time() - 1)
    _, other = await store.create("globex", environments=["prod"])
    assert (await store.get(old.id)).state_at(time.time()) == EXPIRED
    assert {r.id for r in await store.list()} == {old.id, other.id}
    assert [r.id for r in await store.list("globex")] == [other.id]
    assert (await store.get(other.id)).environments == ("prod",)
    await store.touch({old.id: 1000.5, other.id: 2000.25})
    assert (await store.get(old.id)).last_used_at == 1000.5
    assert (await store.get(other.id)).last_used_at == 2000.25
    public = (await store.get(other.id)).public(time.time())
    assert "secret_hash" not in public and public["state"] == ACTIVE


async def test_two_replicas_share_one_store(keystore_url):
    first, second = await open_keystore(keystore_url), await open_keystore(keystore_url)
    try:
        _, record = await first.create("acme")
        assert (await second.get(record.id)).status == ACTIVE
        await second.revoke(record.id, reason="from the other replica")
        assert (await first.get(record.id)).status == REVOKED
        # Concurrent creates from both do not collide.
        made = await asyncio.gather(*(s.create("acme") for s in (first, second) for _ in range(5)))
        assert len({r.id for _, r in made}) == 10
    finally:
        await first.close()
        await second.close()


def _files_containing(root: Path, needles: list[bytes]) -> list[str]:
    hits = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            try:
                data = Path(path).read_bytes()
            except OSError:
                continue
            if any(n in data for n in needles):
                hits.append(path)
    return hits


async def test_sqlite_file_never_contains_a_plaintext_key(tmp_path):
    store = await open_keystore(f"sqlite:///{tmp_path}/keys.db")
    keys = [(await store.create("acme", name=f"k{i}"))[0] for i in range(20)]
    await store.revoke(keyformat.parse_key(keys[0]).key_id, reason="x")
    needles = [k.encode() for k in keys] + [keyformat.parse_key(k).secret.encode() for k in keys]
    # Checked with the WAL still open (before close) and after the checkpoint on close.
    assert _files_containing(tmp_path, needles) == []
    await store.close()
    assert _files_containing(tmp_path, needles) == []
    # The file holds the hashes: the grep would have found something that is there.
    record_hash = keyformat.hash_secret(keyformat.parse_key(keys[1]).key_id,
                                        keyformat.parse_key(keys[1]).secret).hex().encode()
    assert _files_containing(tmp_path, [record_hash]) != []


async def test_postgres_tables_and_data_files_never_contain_a_plaintext_key(postgres_server):
    url = postgres_server.new_database()
    store = await open_keystore(url)
    try:
        keys = [(await store.create("acme", name=f"k{i}", reason="r"))[0] for i in range(20)]
        await store.suspend(keyformat.parse_key(keys[0]).key_id, duration_s=60, reason="x")
    finally:
        await store.close()
    database = url.split("/")[3].split("?")[0]
    dump = postgres_server.psql("SELECT * FROM tokenward_api_keys; SELECT * FROM tokenward_key_audit;", database)
    secrets_ = [keyformat.parse_key(k).secret for k in keys]
    assert keyformat.parse_key(keys[1]).key_id in dump
    assert not any(s in dump for s in secrets_)
    postgres_server.psql("CHECKPOINT")
    needles = [s.encode() for s in secrets_]
    assert _files_containing(Path(postgres_server.data_dir), needles) == []


def test_engine_urls_and_durations():
    assert engine_url("sqlite:///keys.db") == "sqlite+aiosqlite:///keys.db"
    assert engine_url("postgresql://u@h/db") == "postgresql+asyncpg://u@h/db"
    assert engine_url("postgres://u@h/db") == "postgresql+asyncpg://u@h/db"
    assert parse_duration("30d") == 30 * 86400 and parse_duration("1h") == 3600 and parse_duration("90") == 90
    for bad in ("", "-1h", "1y", "0s"):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_key_format():
    plaintext, key_id, secret_hash = keyformat.new_key()
    assert plaintext.startswith(f"tw_{key_id}_") and len(plaintext) == keyformat.KEY_LEN
    assert keyformat.key_id_of(plaintext) == key_id == keyformat.key_id_of(key_id)
    assert keyformat.key_id_of("tw_nothex") is None and keyformat.key_id_of("zz" * 8) is None
    for bad in ("", "tw_", plaintext[:-1], plaintext + "x", "xx" + plaintext[2:], plaintext.replace("_", "-", 2)):
        assert keyformat.parse_key(bad) is None
    assert len({keyformat.new_key()[0] for _ in range(200)}) == 200


async def test_a_table_from_before_key_limits_gets_their_columns(keystore_url):
    """A key store made by an earlier version (no per-key limit columns) opens, gains the
    columns, keeps its keys (read with no limits of their own), and stores new keys' limits;
    a second open (another replica) finds nothing left to add."""
    import sqlalchemy as sa
    from sqlalchemy.ext.asyncio import create_async_engine

    from tokenward.config.key_limits import KeyLimits
    from tokenward.keys.tables import api_keys

    old = sa.MetaData()
    sa.Table("tokenward_api_keys", old, *(sa.Column(c.name, c.type, primary_key=c.primary_key, nullable=c.nullable)
                                          for c in api_keys.columns
                                          if c.name not in ("daily_spend_usd", "monthly_spend_usd", "tokens_per_minute")))
    engine = create_async_engine(engine_url(keystore_url))
    async with engine.begin() as conn:
        await conn.run_sync(old.create_all)
        await conn.execute(sa.text("INSERT INTO tokenward_api_keys (id, tenant, secret_hash, status, created_at) "
                                   "VALUES ('oldkey', 'acme', 'ab', 'active', 1.0)"))
    await engine.dispose()
    for _ in range(2):
        store = await open_keystore(keystore_url)
        try:
            assert (await store.get("oldkey")).limits() is None
            _, record = await store.create("acme", limits=KeyLimits(daily_spend_usd=2.5, tokens_per_minute=700))
            again = await store.get(record.id)
            assert again.limits() == KeyLimits(daily_spend_usd=2.5, tokens_per_minute=700)
            assert again.public(time.time())["tokens_per_minute"] == 700
        finally:
            await store.close()
