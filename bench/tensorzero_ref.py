"""TensorZero's Rust gateway as a side-by-side path (issue 43), on the gateway's CPU.

The PyPI wheel ``tensorzero`` embeds the gateway. It goes into a venv of its own (under
``$TOKENWARD_BENCH_CACHE``, default ``~/.cache/tokenward-bench``), made by this script the
first time and reused after; nothing of it touches the project's environment.
``tensorzero._start_http_gateway`` starts the gateway on 127.0.0.1 and returns its
``base_url`` (its OpenAI-compatible root, ``.../openai/v1``): a small launcher run with that venv's Python calls it, prints the address,
and waits for SIGTERM. The launcher is pinned to the gateway's CPU with ``taskset``, like
the gateway; its CPU (the process and its threads, and any child it starts) is what the
rig counts.

The config: usage analytics and observability off, no database, one model ``m`` routed to
the benchmark backend's ``/v1/`` as an OpenAI provider, no API key. Requests go to
``<base_url>/chat/completions`` with model ``tensorzero::model_name::m``, the same body as
the gateway's.

    python bench/tensorzero_ref.py --setup      # just make the venv (pip, ~1 min)
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

from harness import GATEWAY_CPU, BenchError, Proc, Procs

VERSION = "2026.6.0"
MODEL = "tensorzero::model_name::m"

CONFIG = """\
[gateway]
disable_pseudonymous_usage_analytics = true

[gateway.observability]
enabled = false

[models.m]
routing = ["backend"]

[models.m.providers.backend]
type = "openai"
model_name = "m"
api_base = "{api_base}"
api_key_location = "none"
"""

LAUNCHER = """\
import signal, sys
import tensorzero

gateway = tensorzero._start_http_gateway(config_file=sys.argv[1], clickhouse_url=None, postgres_url=None,
                                         valkey_url=None, async_setup=False)
print("tensorzero listening on " + gateway.base_url, flush=True)
signal.sigwait({signal.SIGTERM, signal.SIGINT})
"""


def cache_dir() -> Path:
    return Path(os.environ.get("TOKENWARD_BENCH_CACHE") or Path.home() / ".cache" / "tokenward-bench")


def venv_python() -> Path:
    """The venv's Python, with ``tensorzero==VERSION`` installed (made on first use)."""
    home = cache_dir() / f"tensorzero-{VERSION}"
    python = home / "bin" / "python"
    check = [str(python), "-c", f"import importlib.metadata as m; assert m.version('tensorzero') == {VERSION!r}"]
    if python.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return python
    home.parent.mkdir(parents=True, exist_ok=True)
    venv.EnvBuilder(with_pip=True, clear=True).create(home)
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", f"tensorzero=={VERSION}"],
                          capture_output=True, text=True, timeout=900)
    if done.returncode != 0 or subprocess.run(check, capture_output=True).returncode != 0:
        raise BenchError(f"could not install tensorzero=={VERSION} into {home}: {done.stderr[-2000:]}")
    return python


def start_tensorzero(procs: Procs, tmp: Path, backend_url: str) -> tuple[Proc, str]:
    """TensorZero on the gateway's CPU, proxying to the backend; returns (process, chat URL)."""
    python = venv_python()
    config = tmp / "tensorzero.toml"
    config.write_text(CONFIG.format(api_base=backend_url.rstrip("/") + "/v1/"))
    launcher = tmp / "tensorzero_launcher.py"
    launcher.write_text(LAUNCHER)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["RUST_LOG"] = "warn"
    proc = procs.start("tensorzero", [str(python), str(launcher), str(config)], GATEWAY_CPU, env)
    base_url = proc.wait_line(r"tensorzero listening on (http://\S+)", timeout=60).group(1).rstrip("/")
    return proc, base_url + "/chat/completions"


if __name__ == "__main__":
    if "--setup" in sys.argv:
        print(venv_python())
