"""A plain nginx hop, for scale: issue 2 quotes "a plain nginx hop ~62,000" requests per
second on the rig its targets were set on; measured here in the same run as the gateway
(``overhead.py --nginx``), it says how this machine compares with that one.

nginx runs as one process (no master, one event loop) pinned to the gateway's CPU, with
keep-alive connections to the same backend, access log off: the cheapest proxy hop this
machine can make. Needs ``nginx`` (Debian: ``apt-get install nginx-light``).
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

from harness import GATEWAY_CPU, BenchError, Proc, Procs, require

CONF = """\
worker_processes 1;
master_process off;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/nginx-body;
    proxy_temp_path {tmp}/nginx-proxy;
    fastcgi_temp_path {tmp}/nginx-fastcgi;
    uwsgi_temp_path {tmp}/nginx-uwsgi;
    scgi_temp_path {tmp}/nginx-scgi;
    upstream backend {{ server {backend}; keepalive 256; }}
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        location / {{
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}
    }}
}}
"""


def _free_port() -> int:
    # nginx cannot listen on port 0; ask the OS for a free port and hand it over
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_nginx(procs: Procs, tmp: Path, backend_url: str) -> tuple[Proc, str]:
    binary = require("nginx")
    port = _free_port()
    conf = tmp / "nginx.conf"
    conf.write_text(CONF.format(tmp=tmp, backend=backend_url.split("://", 1)[1].rstrip("/"), port=port))
    proc = procs.start("nginx", [binary, "-c", str(conf), "-e", str(tmp / "nginx-error.log")], GATEWAY_CPU)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc, f"http://127.0.0.1:{port}"
        except OSError:
            if proc.popen.poll() is not None:
                break
            time.sleep(0.05)
    raise BenchError(f"nginx did not start: {(tmp / 'nginx-error.log').read_text(errors='replace')[-2000:]}")
