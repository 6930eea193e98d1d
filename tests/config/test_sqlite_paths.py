"""A relative SQLite path in the config file is relative to the file's folder, not the
working directory; ``TOKENWARD_KEYSTORE_URL`` from the environment is taken as it is (so a
relative path there is relative to the working directory, like any path on a command line)."""

from __future__ import annotations

import pytest

from tokenward.config import load_config, parse_config


def _config(folder, keystore: str | None):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "gateway.yaml"
    path.write_text("plans: {team: {}}\n" + (f"keystore: {{url: '{keystore}'}}\n" if keystore else ""))
    return path


@pytest.mark.parametrize("written, resolved", [
    ("sqlite:///keys.db", "sqlite:///{d}/keys.db"),
    ("sqlite:///data/keys.db", "sqlite:///{d}/data/keys.db"),
    ("sqlite+aiosqlite:///keys.db", "sqlite+aiosqlite:///{d}/keys.db"),
    ("sqlite:///keys.db?timeout=5", "sqlite:///{d}/keys.db?timeout=5"),
    ("sqlite:////var/lib/tw/keys.db", "sqlite:////var/lib/tw/keys.db"),   # absolute: unchanged
    ("sqlite://", "sqlite://"),                                           # in memory
    ("sqlite:///:memory:", "sqlite:///:memory:"),
    ("postgresql://tw@db/keys", "postgresql://tw@db/keys"),
])
def test_keystore_paths_resolve_against_the_config_folder(tmp_path, written, resolved):
    folder = tmp_path / "etc" / "tw"
    cfg = load_config(_config(folder, written), environ={})
    assert cfg.keystore.url == resolved.format(d=folder.resolve())


def test_the_default_keystore_sits_beside_the_config_too(tmp_path):
    cfg = load_config(_config(tmp_path / "etc", None), environ={})
    assert cfg.keystore.url == f"sqlite:///{(tmp_path / 'etc').resolve()}/tokenward-keys.db"


def test_a_relative_config_path_resolves_from_where_it_was_named(tmp_path, monkeypatch):
    _config(tmp_path / "conf", "sqlite:///keys.db")
    monkeypatch.chdir(tmp_path)
    assert load_config("conf/gateway.yaml", environ={}).keystore.url == f"sqlite:///{tmp_path.resolve()}/conf/keys.db"


def test_the_environment_url_is_taken_as_it_is(tmp_path):
    path = _config(tmp_path / "etc", "sqlite:///keys.db")
    cfg = load_config(path, environ={"TOKENWARD_KEYSTORE_URL": "sqlite:///local/keys.db"})
    assert cfg.keystore.url == "sqlite:///local/keys.db"


def test_text_without_a_file_keeps_its_paths():
    assert parse_config("keystore: {url: 'sqlite:///keys.db'}\n", environ={}).keystore.url == "sqlite:///keys.db"
