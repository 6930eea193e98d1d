"""Instructions per relayed stream chunk in the running gateway, counted by callgrind.

    python bench/stream_instructions.py [--streams 20] [--rate 10] [--low 20] [--high 80]
    PYTHONPATH=/tmp/old/src python bench/stream_instructions.py   # another tree (compiled or not)

The gateway (``--pipeline full``, memory store) runs under valgrind's callgrind with its
instrumentation off through start-up and a warm-up; it is switched on for two runs of
``--streams`` streams from the benchmark backend, ``--low`` then ``--high`` chunks each,
counted separately (callgrind_control). The difference divided by the chunks between them
is what one more relayed chunk costs in user space: the upstream read's callbacks, the SSE
split, the accounting, the outbound write, the event loop's share; the requests themselves
cancel out. The kernel is not in it (syscalls count as one instruction): this counts what
the gateway's own code and the libraries under it do per chunk, which on this shared VM a
timing cannot resolve (bench/overhead.py --streams moves by 10-25% with the host).

The load is light (callgrind runs the gateway ~50x slower) so that the gateway keeps up
and reads one chunk per read, as it does at full speed below saturation.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

from harness import BENCH_DIR, GATEWAY_CPU, PYTHON, Procs, http_post, raise_fd_limit, require, run_main
from overhead import create_key, probe, run_streams, start_backend, write_config


def _counted(pid: int, out: Path, before: set[Path]) -> int:
    """Dump callgrind's counters (since the last zeroing) and return the instructions."""
    subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True, timeout=120)
    dumps = set(out.parent.glob(out.name + "*")) - before
    before |= dumps
    total = 0
    for dump in dumps:
        found = re.search(r"^(?:summary|totals): (\d+)", dump.read_text(errors="replace"), re.M)
        if found:
            total += int(found.group(1))
    return total


def measure(args: argparse.Namespace, procs: Procs, tmp: Path) -> dict:
    backend, backend_url = start_backend(procs, args.rate)
    config = write_config("full", tmp, backend_url, None)
    api_key = create_key(config, tmp)
    out = tmp / "cg.out"
    gateway = procs.start("gateway", ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                                      f"--callgrind-out-file={out}", PYTHON,
                                      str(BENCH_DIR / "gateway_launcher.py"), "serve", "--config", str(config),
                                      "--port", "0", "--workers", "1"], GATEWAY_CPU,
                          {**os.environ, "PYTHONHASHSEED": "0"})
    port = gateway.wait_line(r"tokenward listening on http://127\.0\.0\.1:(\d+)", timeout=600).group(1)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):   # the port is bound before start-up completes (slowly, under callgrind)
        status, _body = http_post(url + "/healthz", b"", {})
        if status != 503:
            break
        time.sleep(1)
    api_key = probe(url, api_key, config, tmp)
    run_streams(url, args.streams, args.low, args.rate, api_key)   # warm-up, not counted
    seen: set[Path] = set(tmp.glob("cg.out*"))
    subprocess.run(["callgrind_control", "-i", "on", str(gateway.pid)], check=True, capture_output=True, timeout=120)
    counts = {}
    for chunks in (args.low, args.high):
        subprocess.run(["callgrind_control", "-z", str(gateway.pid)], check=True, capture_output=True, timeout=120)
        result = run_streams(url, args.streams, chunks, args.rate, api_key)
        if result["chunks_received"] != args.streams * chunks or result["failed"]:
            raise SystemExit(f"streams of {chunks} chunks did not all arrive: {result}")
        counts[chunks] = _counted(gateway.pid, out, seen)
    per_chunk = (counts[args.high] - counts[args.low]) / (args.streams * (args.high - args.low))
    return {"counts": counts, "per_chunk": per_chunk}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--rate", type=float, default=10.0, help="chunks per second per stream")
    parser.add_argument("--low", type=int, default=20, help="chunks per stream, first run")
    parser.add_argument("--high", type=int, default=80, help="chunks per stream, second run")
    args = parser.parse_args()
    require("valgrind")
    raise_fd_limit()
    with tempfile.TemporaryDirectory(prefix="tokenward-streamcg-") as tmp_name:
        with Procs(Path(tmp_name), deadline_s=1800) as procs:
            result = measure(args, procs, Path(tmp_name))
    low, high = args.low, args.high
    print(f"callgrind, full pipeline, memory store, {args.streams} streams at {args.rate:g} chunks/s: "
          f"{result['counts'][low]:,} instructions for {low} chunks each, {result['counts'][high]:,} for {high}")
    print(f"instructions per relayed chunk: {result['per_chunk']:,.0f}")


if __name__ == "__main__":
    run_main(main, "stream_instructions")
