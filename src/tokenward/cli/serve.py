"""``tokenward serve``: bind, start one or more workers on the one socket, then say where.

What it prints is true when printed: ``tokenward listening on http://H:P`` (and the demo
key) only once every worker's app has started; a start that fails is one line on stderr,
``tokenward: <reason>``, with exit code 3 and nothing on stdout. (A config that does not
pass check-config's checks is refused before this, with exit code 2: cli/main.py.)
"""

from __future__ import annotations

import atexit
import errno
import logging
import os
import resource
import select
import shutil
import signal
import socket
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Callable, NoReturn

from .. import memos
from ..config.schema import Config
from ..http.limits import client_limits
from ..http.tls import server_tls
from .demo_key import demo_key

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


def bind_socket(host: str, port: int, reuse_port: bool = False, listen: bool = True) -> socket.socket:
    """A bound TCP socket. ``reuse_port``: one of a group of sockets on one port, each its
    own worker's (SO_REUSEPORT: the kernel spreads new connections over the group's
    listening sockets, where one socket shared by several processes wakes them all and
    lets one take more than its share)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        if listen:
            sock.listen(2048)
    except BaseException:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


# Exit codes: 2 is a config refused (cli/main.py, like check-config); 3 is a start that
# failed with a valid config: the port is taken, a store or the key store refused.
EXIT_START_FAILED = 3


def _fail(reason: str) -> NoReturn:
    """The one line a failed start prints, then exit 3 (no traceback, nothing on stdout)."""
    sys.stdout.flush()
    sys.stderr.write(f"tokenward: {_one_line(reason)}\n")
    sys.stderr.flush()
    raise SystemExit(EXIT_START_FAILED)


def _one_line(reason: str) -> str:
    lines = [line.strip() for line in str(reason).splitlines() if line.strip()]
    return lines[0] if lines else "start-up failed"


def _why(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _listen(host: str, port: int, workers: int = 1) -> socket.socket:
    """The listening socket of one worker; with several, the port's reservation: bound in the
    SO_REUSEPORT group but not listening (a listening socket nobody accepts on would get a
    share of the connections), while each worker binds and listens on its own."""
    try:
        return bind_socket(host, port, reuse_port=workers > 1, listen=workers <= 1)
    except (OSError, OverflowError) as exc:
        why = getattr(exc, "strerror", None) or _why(exc)
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        hint = ""
        if getattr(exc, "errno", None) in (errno.EADDRINUSE, errno.EACCES):
            hint = " (choose another port with --port, or server.port in the config)"
        _fail(f"cannot listen on {where}: {why[:1].lower()}{why[1:]}{hint}")


class _HeldLogs(logging.Handler):
    """Start-up's log records, held: written to stderr once the app started, dropped if it
    failed (the failure is then the one line ``tokenward: <reason>``)."""

    def __init__(self, level: str) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []
        self.level_name = level.upper()
        root = logging.getLogger()
        root.setLevel(self.level_name)
        root.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def show(self) -> None:
        root = logging.getLogger()
        root.removeHandler(self)
        logging.basicConfig(level=self.level_name, stream=sys.stderr,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        for record in self.records:
            for handler in root.handlers:
                handler.handle(record)
        self.records.clear()


def _run_worker(config: Config, sock: socket.socket, report: Callable[[str | None], None],
                config_path: Path | None = None, forked: bool = False,
                shared_metrics_dir: str | None = None) -> bool:
    """One worker's life; ``report`` hears None once its app started, else why it did not.
    SIGHUP reloads the config file (cli/reload.py); ``POST /admin/reload`` does the same, for a
    forked worker by signalling the parent, which passes SIGHUP on to every worker."""
    from ..app import Gateway
    from ..http import serving
    from ..http.state import MAX_HEAD_BYTES
    from .reload import Reloader

    held = _HeldLogs(config.logging.level)

    def started(reason: str | None) -> None:
        if reason is None:
            held.show()
        report(reason)

    # The whole head's cap across reads; the edge's own limits are counted per header.
    max_head = max(MAX_HEAD_BYTES, 4 * config.edge.max_header_bytes)
    open_files = raise_open_file_limit()
    cap = connection_cap(config, open_files)
    log.info("open-file limit %d: up to %d client connections", open_files, cap)
    memos.configure(config.memos.max_bytes)   # one bound for the process's memos (memos.py)
    app = Gateway(config, freeze_gc=True, shared_metrics_dir=shared_metrics_dir)
    reloader = Reloader(config_path) if config_path is not None else None
    if reloader is not None and forked:
        async def signal_parent() -> str:
            os.kill(os.getppid(), signal.SIGHUP)
            return "signalled every worker"
        app.reload_hook = signal_parent
    return serving.run(app, [sock], keep_alive_s=config.server.keep_alive_s,
                       graceful_s=config.server.graceful_shutdown_s, max_head_bytes=max_head,
                       max_connections=cap, max_header_bytes=config.edge.max_header_bytes,
                       max_headers=config.edge.max_headers, started=started, ssl_context=server_tls(config),
                       reload=reloader, hook_reload=not forked, limits=client_limits(config))


def _demo_line(config: Config) -> tuple[Config, str | None]:
    """Made here, before the workers start, for them all (they are told not to make one);
    printed only once they have started."""
    if config.demo is None:
        return config, None
    import asyncio

    import msgspec

    from ..config.stores import Store, failure
    from ..errors import ConfigError

    try:
        key = asyncio.run(demo_key(config))
    except ConfigError as exc:
        _fail(f"cannot make the demo key: {_why(exc)}")
    except Exception as exc:   # it is kept in the key store: say which one could not be reached
        _fail(failure(Store("key store", config.keystore.url), exc))
    line = f"demo key: {key}" if config.demo.print_key else None
    return msgspec.structs.replace(config, demo=None), line


def serve(config: Config, host: str, port: int, workers: int, config_path: Path | None = None) -> None:
    try:
        _serve(config, host, port, workers, config_path)
    except KeyboardInterrupt:   # Ctrl-C before the workers' own handlers are in place
        raise SystemExit(130) from None


def _serve(config: Config, host: str, port: int, workers: int, config_path: Path | None) -> None:
    # Bound first: a taken port is found before anything (the demo key) is made.
    sock = _listen(host, port, workers)
    config, demo_line = _demo_line(config)
    actual = sock.getsockname()[1]
    scheme = "https" if config.server.tls is not None else "http"

    def announce() -> None:
        print(f"tokenward listening on {scheme}://{host}:{actual}", flush=True)
        if demo_line is not None:
            print(demo_line, flush=True)

    if workers <= 1:
        _serve_here(config, sock, announce, config_path)
    else:
        _serve_forked(config, sock, workers, announce, config_path)


def _serve_here(config: Config, sock: socket.socket, announce: Callable[[], None], config_path: Path | None) -> None:
    failure: list[str] = []

    def report(reason: str | None) -> None:
        if reason is None:
            announce()
        else:
            failure.append(reason)

    if not _run_worker(config, sock, report, config_path):
        sys.stdout.flush()
        sys.stderr.write(f"tokenward: {_one_line(failure[0] if failure else 'start-up failed')}\n")
        sys.stderr.flush()
        # Whatever start-up opened before it failed (a thread, a pool) must not hold the exit.
        os._exit(EXIT_START_FAILED)


def _serve_forked(config: Config, sock: socket.socket, workers: int, announce: Callable[[], None],
                  config_path: Path | None) -> None:
    """Several workers on the one socket. Each reports on a pipe how its start-up ended; the
    parent says "listening" only once all of them started (a gateway that says it listens
    with some workers dead would answer some connections and not others), and if any
    failed it stops the rest and prints that one reason."""
    reports, report_w = os.pipe()
    # where the workers meet to answer a scrape together (observe/shared_metrics.py)
    shared = tempfile.mkdtemp(prefix="tokenward-metrics-")
    atexit.register(shutil.rmtree, shared, True)
    sys.stdout.flush()
    sys.stderr.flush()
    children = [_fork_worker(config, sock, reports, report_w, config_path, shared) for _ in range(workers)]
    os.close(report_w)
    stopping: list[int] = []

    def _stop(signum: int, _frame: FrameType | None) -> None:
        stopping.append(signum)
        _signal_all(children, signal.SIGTERM)

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    # a reload (SIGHUP to the parent, or POST /admin/reload on any worker) reaches them all
    signal.signal(signal.SIGHUP, lambda _signum, _frame: _signal_all(children, signal.SIGHUP))
    exited: dict[int, int] = {}
    failure = _await_workers(reports, children, exited)
    os.close(reports)
    if failure is not None and not stopping:
        _signal_all(children, signal.SIGTERM)
        _wait_all(children, exited)
        _fail(failure)
    if failure is None and not stopping:
        announce()
    status = _wait_all(children, exited)
    sys.exit(max(status, 0))


def _fork_worker(config: Config, sock: socket.socket, reports: int, report_w: int, config_path: Path | None,
                 shared_metrics_dir: str) -> int:
    pid = os.fork()
    if pid:
        return pid
    os.close(reports)
    code = EXIT_START_FAILED
    reported: list[str | None] = []

    def report(reason: str | None) -> None:
        reported.append(reason)
        line = "ok" if reason is None else "failed " + _one_line(reason)
        os.write(report_w, line.encode()[:500] + b"\n")   # under PIPE_BUF: one write, never interleaved

    try:
        host, port = sock.getsockname()[:2]
        own = bind_socket(host, port, reuse_port=True)   # this worker's share of the port
        code = 0 if _run_worker(config, own, report, config_path, forked=True,
                                     shared_metrics_dir=shared_metrics_dir) else EXIT_START_FAILED
    except BaseException as exc:  # the parent must hear of any end before start-up finished
        if not reported:
            try:
                report(_why(exc))
            except OSError:
                pass
    finally:
        os._exit(code)


def _await_workers(reports: int, children: list[int], exited: dict[int, int]) -> str | None:
    """None once every worker reported it started, else the first reason one did not."""
    ready, pending, dead = 0, b"", False
    while ready < len(children):
        try:
            readable = select.select([reports], [], [], 0.2)[0]
        except InterruptedError:
            continue
        if readable:
            chunk = os.read(reports, 4096)
            if not chunk:
                return "a worker exited during start-up"
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                if line != b"ok":
                    return line.decode(errors="replace").removeprefix("failed ")
                ready += 1
        elif dead:   # and what it wrote before it ended, if anything, was read above
            return f"a worker exited during start-up (exit code {next(iter(exited.values()))})"
        else:
            dead = _reap(children, exited)
    return None


def _reap(children: list[int], exited: dict[int, int]) -> bool:
    """Collect children that ended; True if any did (a worker killed before it reported)."""
    ended = False
    for child in children:
        if child not in exited:
            pid, code = os.waitpid(child, os.WNOHANG)
            if pid:
                exited[child] = os.waitstatus_to_exitcode(code)
                ended = True
    return ended


def _signal_all(children: list[int], signum: int) -> None:
    for child in children:
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            pass


def _wait_all(children: list[int], exited: dict[int, int]) -> int:
    status = 0
    for child in children:
        if child not in exited:
            _, code = os.waitpid(child, 0)
            exited[child] = os.waitstatus_to_exitcode(code)
        status = status or exited[child]
    return status
