"""Instructions per request, counted by valgrind's callgrind: the gateway's own Python
(bench/inproc.py: the app without sockets) at two request counts, the difference divided
by the requests between them, so start-up cancels out.

    python bench/instructions.py [--config full] [--stages edge,...] [--store URL]

Why: on this shared VM timings move by ±10-25% with the host, which hides a change worth
2%. An instruction count does not move with the host (PYTHONHASHSEED is fixed), so a small
optimisation can be judged in one run. It is not time: a cache miss costs more than an
add, and syscalls are not in it. Takes ~1 minute (callgrind runs ~50x slower).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent


def _count(requests: int, args: argparse.Namespace, workdir: Path) -> int:
    argv = [sys.executable, str(BENCH_DIR / "inproc.py"), "--config", args.config,
            "--requests", str(requests), "--repeat", "1", "--deterministic"]
    if args.stages:
        argv += ["--stages", args.stages]
    if args.store:
        argv += ["--store", args.store]
    done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={workdir}/cg.%p.out", *argv],
                          capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"}, timeout=1800)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or not found:
        raise SystemExit(f"callgrind run failed ({done.returncode}):\n{done.stdout[-1500:]}\n{done.stderr[-1500:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", choices=("foundation", "full"), default="full")
    parser.add_argument("--stages", help="only these pipeline slots (inproc.py --stages)")
    parser.add_argument("--store", help="store.url instead of the config's")
    parser.add_argument("--low", type=int, default=300)
    parser.add_argument("--high", type=int, default=1300)
    args = parser.parse_args()
    # inproc.py runs min(2000, n) warm-up requests, then n timed ones: 2n in all below 2,000.
    if args.high > 2000:
        raise SystemExit("--high must be at most 2000")
    with tempfile.TemporaryDirectory(prefix="tokenward-cg-") as tmp:
        low, high = _count(args.low, args, Path(tmp)), _count(args.high, args, Path(tmp))
    per_request = (high - low) / (2 * (args.high - args.low))
    print(f"config {args.config}, stages {args.stages or 'all'}: {per_request:,.0f} instructions per request "
          f"({low:,} at {args.low}, {high:,} at {args.high} requests)")


if __name__ == "__main__":
    main()
