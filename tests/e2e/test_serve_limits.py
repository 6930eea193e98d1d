"""``tokenward serve`` and the open-file limit: raised at start-up, and client connections
capped below it so the upstream pools and the stores always have descriptors left."""

from __future__ import annotations

import json
import resource
import socket
import time

import pytest

from tokenward.cli.serve import connection_cap
from tokenward.config import load_config
from tests.support import ROOT, spawn_gateway

QUICKSTART = ROOT / "examples" / "quickstart.yaml"


def copied(folder) -> "Path":
    """The quickstart config copied into ``folder``: its key store and demo key land there
    (a relative SQLite path is relative to the config's folder), never in examples/."""
    from pathlib import Path

    path = Path(folder) / "quickstart.yaml"
    path.write_text(QUICKSTART.read_text())
    return path


def soft_limit_of(pid: int) -> int:
    with open(f"/proc/{pid}/limits") as limits:
        line = next(line for line in limits if line.startswith("Max open files"))
    return int(line.split()[3])


def with_open_files(soft: int, hard: int):
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_serve_raises_its_soft_open_file_limit_to_the_hard_one(tmp_path):
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 256:
        pytest.skip("the hard limit leaves nothing to raise")
    gateway = spawn_gateway(copied(tmp_path), cwd=tmp_path, preexec_fn=with_open_files(256, hard))
    try:
        expected = 1 << 20 if hard == resource.RLIM_INFINITY else min(hard, 1 << 20)
        assert soft_limit_of(gateway.proc.pid) == expected
    finally:
        gateway.stop()


def _get_healthz(sock: socket.socket) -> bytes:
    sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
    return sock.recv(4096)


def test_serve_caps_client_connections_below_the_open_file_limit(tmp_path):
    # With only 300 descriptors (soft = hard, so nothing to raise), the quickstart's upstream
    # pool and the stores keep theirs: clients get the rest, and one more is turned away.
    cap = connection_cap(load_config(QUICKSTART), 300)
    gateway = spawn_gateway(copied(tmp_path), cwd=tmp_path, preexec_fn=with_open_files(300, 300))
    host, port = gateway.url.removeprefix("http://").split(":")
    held = []
    try:
        for _ in range(cap):
            sock = socket.create_connection((host, int(port)), timeout=5)
            held.append(sock)
            assert _get_healthz(sock).startswith(b"HTTP/1.1 200 ")
        with socket.create_connection((host, int(port)), timeout=5) as extra:
            answer = b""
            while chunk := extra.recv(4096):
                answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503 ") and b"\r\nretry-after: 1\r\n" in head
        assert json.loads(body)["error"]["code"] == "too_many_connections"
        held.pop().close()
        for _ in range(50):   # the freed slot is taken again (once the server saw the close)
            with socket.create_connection((host, int(port)), timeout=5) as again:
                if _get_healthz(again).startswith(b"HTTP/1.1 200 "):
                    break
            time.sleep(0.02)
        else:
            raise AssertionError("a freed connection slot was never reused")
    finally:
        for sock in held:
            sock.close()
        gateway.stop()
