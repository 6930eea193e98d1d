"""``tokenward serve``: bind, print where, run one or more workers on the one socket."""

from __future__ import annotations

import logging
import os
import resource
import signal
import socket
import sys

from ..config.schema import Config

log = logging.getLogger("tokenward")

# Descriptors kept back from client connections: the store's and key store's connections,
# the decision log, the listener, a few for what start-up opens.
_RESERVED_FDS = 64
_MAX_FDS = 1 << 20


def raise_open_file_limit() -> int:
    """The soft limit on open files, raised to the hard one (capped at 2^20). A stream holds
    two descriptors, the client's and the backend's, and the soft limit many service
    managers start a process with (1,024) leaves room for only a few hundred."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = _MAX_FDS if hard == resource.RLIM_INFINITY else min(hard, _MAX_FDS)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-file limit from %d to %d: %s", soft, target, exc)
    return _MAX_FDS if soft == resource.RLIM_INFINITY else soft


def connection_cap(config: Config, open_files: int) -> int:
    """Client connections per worker: the configured number, or what the open-file limit
    leaves once every upstream pool could be full and the stores have theirs."""
    if config.server.max_connections is not None:
        return config.server.max_connections
    pools = sum(upstream.pool_size for upstream in config.upstreams.values())
    if open_files - pools - _RESERVED_FDS < 16:
        log.warning("an open-file limit of %d leaves too little beside the upstream pools (%d): raise the hard "
                    "limit or lower upstreams.*.pool_size", open_files, pools)
    return max(open_files - pools - _RESERVED_FDS, 16)


def bind_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _run_worker(config: Config, sock: socket.socket) -> None:
    from ..app import Gateway
    from ..http import serving

    logging.basicConfig(level=config.logging.level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # The whole head's cap across reads; the edge's own limits are counted per header.
    max_head = max(serving.MAX_HEAD_BYTES, 4 * config.edge.max_header_bytes)
    open_files = raise_open_file_limit()
    cap = connection_cap(config, open_files)
    log.info("open-file limit %d: up to %d client connections", open_files, cap)
    started = serving.run(Gateway(config, freeze_gc=True), [sock], keep_alive_s=config.server.keep_alive_s,
                          graceful_s=config.server.graceful_shutdown_s, max_head_bytes=max_head,
                          max_connections=cap, max_header_bytes=config.edge.max_header_bytes,
                          max_headers=config.edge.max_headers)
    if not started:
        sys.exit(3)


def _demo_key_once(config: Config) -> Config:
    """Several workers share one demo key: made here, and the workers are told not to."""
    if config.demo is None:
        return config
    import asyncio

    import msgspec

    from ..identity.wiring import create_demo_key

    asyncio.run(create_demo_key(config))
    return msgspec.structs.replace(config, demo=None)


def serve(config: Config, host: str, port: int, workers: int) -> None:
    if workers > 1:
        config = _demo_key_once(config)
    sock = bind_socket(host, port)
    actual = sock.getsockname()[1]
    print(f"tokenward listening on http://{host}:{actual}", flush=True)
    if workers <= 1:
        _run_worker(config, sock)
        return
    children = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:
            try:
                _run_worker(config, sock)
            finally:
                os._exit(0)
        children.append(pid)

    def _stop(signum, _frame):
        for child in children:
            try:
                os.kill(child, signal.SIGTERM)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    status = 0
    for child in children:
        _, code = os.waitpid(child, 0)
        status = status or os.waitstatus_to_exitcode(code)
    sys.exit(max(status, 0))
