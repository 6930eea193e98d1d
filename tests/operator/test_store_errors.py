"""A store that cannot be reached is one line naming the store and its URL, the password
left out: from ``serve`` at start-up (exit 3) and from ``check-config --connect`` (exit 3)
in the same words; plain check-config touches no store."""

from __future__ import annotations

import socket

from tests.e2e.test_operator_ergonomics import quickstart_copy, tokenward


def _closed_port() -> int:
    with socket.socket() as probe:   # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _without_demo(text: str) -> str:
    return text.replace("demo:\n  tenant: demo\n", "")


def test_an_unreachable_key_store_is_named_with_its_url_and_no_password(tmp_path):
    port = _closed_port()
    url = f"postgresql://tw:s3cret@127.0.0.1:{port}/keys"
    line = f"tokenward: cannot reach the key store at postgresql://tw:***@127.0.0.1:{port}/keys: connection refused\n"
    for edit in (lambda t: t, _without_demo):   # the demo key is made first; without it, the workers open the store
        config = quickstart_copy(tmp_path, lambda t: edit(t).replace("sqlite:///tokenward-quickstart-keys.db", url))
        done = tokenward("serve", "--config", str(config), "--port", "0", cwd=tmp_path)
        assert (done.returncode, done.stdout, done.stderr) == (3, "", line)
    plain = tokenward("check-config", str(config), cwd=tmp_path)
    assert plain.returncode == 0 and plain.stderr == ""
    probed = tokenward("check-config", "--connect", str(config), cwd=tmp_path)
    assert probed.returncode == 3
    assert probed.stderr == line and "s3cret" not in probed.stdout + probed.stderr
    listed = tokenward("keys", "list", "--config", str(config), cwd=tmp_path)   # the keys CLI says it alike
    assert listed.returncode == 1 and listed.stderr == "error: " + line.removeprefix("tokenward: ")


def test_a_sqlite_key_store_that_cannot_be_made_is_named(tmp_path):
    (tmp_path / "afile").write_text("a file where the key store wants a folder\n")
    config = quickstart_copy(tmp_path, lambda t: _without_demo(t).replace(
        "sqlite:///tokenward-quickstart-keys.db", "sqlite:///afile/keys.db"))
    done = tokenward("serve", "--config", str(config), "--port", "0", cwd=tmp_path)
    assert done.returncode == 3 and done.stdout == ""
    assert done.stderr.startswith(f"tokenward: cannot reach the key store at sqlite:///{tmp_path}/afile/keys.db: ")
    assert done.stderr.count("\n") == 1
    probed = tokenward("check-config", "--connect", str(config), cwd=tmp_path)
    assert probed.returncode == 3
    assert probed.stderr.startswith(f"tokenward: cannot reach the key store at sqlite:///{tmp_path}/afile/keys.db: ")


def test_check_config_connect_names_an_unreachable_budget_store(tmp_path):
    port = _closed_port()
    config = quickstart_copy(tmp_path, lambda t: t.replace("url: memory", f'url: "redis://:pw@127.0.0.1:{port}/0"'))
    probed = tokenward("check-config", "--connect", str(config), cwd=tmp_path)
    assert probed.returncode == 3
    assert probed.stderr == (f"tokenward: cannot reach the budget store at redis://:***@127.0.0.1:{port}/0: "
                             "connection refused\n")
    assert "key store at sqlite:///" in probed.stdout and ": ok" in probed.stdout
    assert not (tmp_path / "tokenward-quickstart-keys.db").exists()   # a probe makes no store


def test_check_config_connect_reaches_the_identity_providers_key_set(tmp_path):
    port = _closed_port()
    jwt = ("jwt:\n  issuers:\n    - {issuer: 'https://idp.example/', audience: tw, tenant_claim: org, "
           f"jwks_url: 'http://127.0.0.1:{port}/jwks.json'}}\n")
    config = quickstart_copy(tmp_path, lambda t: t + jwt)
    assert tokenward("check-config", str(config), cwd=tmp_path).returncode == 0   # no network without --connect
    probed = tokenward("check-config", "--connect", str(config), cwd=tmp_path)
    assert probed.returncode == 3
    assert probed.stderr == (f"tokenward: cannot reach the identity provider's key set at "
                             f"http://127.0.0.1:{port}/jwks.json: connection refused\n")
