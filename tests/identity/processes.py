"""Running ``tokenward`` as real processes: the CLI, and ``serve`` on a port the OS picks."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.identity.conftest import ADMIN_TOKEN, ADMIN_TOKEN_ENV


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tokenward", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, check=False)


def _readline(proc: subprocess.Popen, deadline: float) -> str:
    fd = proc.stdout.fileno()
    buf = b""
    while not buf.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or proc.poll() is not None and not select.select([fd], [], [], 0)[0]:
            raise RuntimeError(f"tokenward serve gave no line in time (exit {proc.poll()}): {buf!r}")
        if select.select([fd], [], [], min(left, 0.1))[0]:
            chunk = os.read(fd, 1)
            if not chunk:
                raise RuntimeError(f"tokenward serve closed stdout: {buf!r}")
            buf += chunk
    return buf.decode()


class ServeProcess:
    def __init__(self, config: Path, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tokenward", "serve", "--config", str(config), "--port", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={**os.environ, ADMIN_TOKEN_ENV: ADMIN_TOKEN, **(env or {})})
        self.lines: list[str] = []

    def ready(self) -> ServeProcess:
        """Wait for the listening line and for /readyz; separate from start-up, so that
        several processes can start in parallel."""
        deadline = time.monotonic() + 30
        first = self.readline(deadline)
        match = re.match(r"tokenward listening on http://127\.0\.0\.1:(\d+)", first)
        if not match:
            self.stop()
            raise RuntimeError(f"unexpected first line: {first!r}")
        self.port = int(match.group(1))
        self.url = f"http://127.0.0.1:{self.port}"
        self._wait_ready(deadline)
        return self

    def readline(self, deadline: float) -> str:
        line = _readline(self.proc, deadline)
        self.lines.append(line)
        return line

    def _wait_ready(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        err = self.stop()
        raise RuntimeError(f"tokenward serve did not become ready: {err}")

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
