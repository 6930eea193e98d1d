"""Shared plumbing for the benchmark scripts: pinned child processes that are always
cleaned up, wrk runs parsed from post.lua's summary line, CPU accounting from /proc,
and the machine description that goes next to every number.
"""

from __future__ import annotations

import json
import os
import platform
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from importlib import metadata
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
POST_LUA = BENCH_DIR / "post.lua"
PYTHON = sys.executable
GATEWAY_CPU = "0"
LOAD_CPU = "1"  # backend, load generator, redis
_CLK_TCK = os.sysconf("SC_CLK_TCK")
# Scheduling priority for everything a benchmark starts (set_priority): on a machine shared
# with other people's work, a negative nice value approximates a quiet machine for the
# few seconds of a run. 0 leaves the default.
_NICE = 0


def set_priority(nice: int) -> None:
    global _NICE
    _NICE = nice


def pinned(cpu: str, argv: list[str]) -> list[str]:
    """``argv`` pinned to ``cpu`` (taskset), at the benchmark's priority (nice)."""
    prefix = ["nice", "-n", str(_NICE)] if _NICE else []
    return [*prefix, "taskset", "-c", cpu, *argv]


class BenchError(RuntimeError):
    pass


def run_main(main, name: str) -> None:
    """Run a script's ``main``; a BenchError is one line on stderr and exit status 1."""
    try:
        main()
    except BenchError as exc:
        print(f"{name} failed: {exc}", file=sys.stderr)
        sys.exit(1)


class Proc:
    """A child in its own process group, pinned with taskset, output in files."""

    def __init__(self, name: str, argv: list[str], cpu: str, workdir: Path, env: dict | None = None) -> None:
        self.name = name
        self.out_path = workdir / f"{name}.out"
        self.err_path = workdir / f"{name}.err"
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.popen = subprocess.Popen(pinned(cpu, argv), stdout=out, stderr=err,
                                          stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        self.pid = self.popen.pid  # nice and taskset exec, so this is the Python process itself

    def wait_line(self, pattern: str, timeout: float = 20.0) -> re.Match:
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = regex.search(self.out_path.read_text(errors="replace"))
            if found:
                return found
            if self.popen.poll() is not None:
                break
            time.sleep(0.02)
        raise BenchError(f"{self.name} did not print {pattern!r} (exit {self.popen.poll()}):\n"
                         f"{self.err_path.read_text(errors='replace')[-3000:]}")

    def cpu_times(self) -> tuple[float, float]:
        """(user, system) CPU seconds so far, of the process and its live children (the
        workers of ``tokenward serve --workers N`` are forked children of the one started)."""
        user = system = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if stat.parent.name == str(self.pid) or fields[1] == str(self.pid):   # fields[1]: the parent pid
                user += int(fields[11])
                system += int(fields[12])
        return user / _CLK_TCK, system / _CLK_TCK

    def cpu_seconds(self) -> float:
        return sum(self.cpu_times())

    def stop(self, grace: float = 5.0) -> None:
        if self.popen.poll() is not None:
            return
        try:
            os.killpg(self.pid, signal.SIGTERM)
            self.popen.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(self.pid, signal.SIGKILL)
            self.popen.wait(5)
        except ProcessLookupError:
            pass


class Procs:
    """Every child a script starts; stopped newest first on any exit, including signals."""

    def __init__(self, workdir: Path, deadline_s: float) -> None:
        self.workdir = workdir
        self.procs: list[Proc] = []
        self.deadline_s = deadline_s

    def start(self, name: str, argv: list[str], cpu: str, env: dict | None = None) -> Proc:
        proc = Proc(name, argv, cpu, self.workdir, env)
        self.procs.append(proc)
        return proc

    def __enter__(self) -> "Procs":
        def _bail(signum, _frame):
            raise SystemExit(f"stopped by signal {signum}")

        signal.signal(signal.SIGTERM, _bail)
        signal.signal(signal.SIGALRM, _bail)
        signal.alarm(int(self.deadline_s))  # whatever happens, this script ends
        return self

    def __exit__(self, *exc) -> None:
        signal.alarm(0)
        while self.procs:
            self.procs.pop().stop()


def raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def cpu_busy() -> dict[str, float]:
    """Busy CPU seconds so far per CPU ("cpu0", "cpu1"), all processes and the kernel."""
    busy = {}
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("cpu") and line[3:4].isdigit():
            fields = line.split()
            values = [int(v) for v in fields[1:]]
            busy[fields[0]] = (sum(values[:8]) - values[3] - values[4]) / _CLK_TCK  # minus idle, iowait
    return busy


def wait_quiet(max_wait_s: float, threshold: float = 0.15, window_s: float = 3.0) -> float:
    """Wait (at most max_wait_s) until every CPU has been under ``threshold`` busy for a
    whole ``window_s``, so a run starts when other people's work has paused. Returns the
    busiest CPU's share in the last window."""
    deadline = time.monotonic() + max_wait_s
    while True:
        before = cpu_busy()
        time.sleep(window_s)
        after = cpu_busy()
        busiest = max((after[c] - before[c]) / window_s for c in before)
        if busiest < threshold or time.monotonic() >= deadline:
            return busiest


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_wrk(url: str, conns: int, duration: float, env: dict | None = None) -> dict:
    """One wrk run on the load CPU; returns post.lua's summary plus derived numbers."""
    argv = pinned(LOAD_CPU, ["wrk", "-t1", f"-c{conns}", f"-d{duration:g}s", "--timeout", "5s",
                             "-s", str(POST_LUA), url])
    before = children_cpu()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 30,
                          env={**os.environ, **(env or {})})
    found = re.search(r"^BENCH_JSON (.*)$", done.stdout, re.M)
    if done.returncode != 0 or not found:
        raise BenchError(f"wrk failed ({done.returncode}): {done.stdout[-2000:]} {done.stderr[-2000:]}")
    result = json.loads(found.group(1))
    seconds = result["duration_us"] / 1e6
    result["rps"] = result["requests"] / seconds
    result["errors"] = sum(result[k] for k in ("connect_errors", "read_errors", "write_errors",
                                               "status_errors", "timeout_errors"))
    result["wrk_cpu_s"] = children_cpu() - before
    return result


def http_post(url: str, body: bytes, headers: dict | None = None, timeout: float = 10.0) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"content-type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def post_when_up(url: str, body: bytes, headers: dict | None = None, wait_s: float = 10.0) -> tuple[int, bytes]:
    """http_post, retried while the port is bound but not yet accepting (start-up)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return http_post(url, body, headers)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine() -> dict:
    mem_kb = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))
    wrk = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout.split("\n")[0]
    return {
        "cpu_model": _cpu_model(),
        "cpus": os.cpu_count(),
        "memory_gib": round(mem_kb / 2**20, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "packages": {p: _version(p) for p in ("uvicorn", "uvloop", "httptools", "aiohttp", "httpx", "msgspec",
                                               "tokenward")},
        "wrk": wrk.strip(),
        "loadavg_start": os.getloadavg(),
    }


def ms(us: float) -> str:
    return f"{us / 1000:.3f} ms"


def require(binary: str) -> str:
    path = shutil.which(binary)
    if path is None:
        raise BenchError(f"{binary} is not installed")
    return path
