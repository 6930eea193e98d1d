"""Where the gateway's CPU goes under load: py-spy samples the running gateway while a
load run drives it, and the collapsed stacks are folded into two tables, self time and
inclusive time per function, as a share of all samples.

Used by ``overhead.py --profile DIR``; standalone on a saved file:

    python bench/profile_gateway.py DIR/gateway.folded [--top 25]

py-spy (``pip install py-spy``) runs on the load CPU at 250 samples/s with --nonblocking,
so it does not stop the gateway to read it; expect the load numbers of a profiled run to
be a little lower than an unprofiled one.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import threading
from collections import Counter
from pathlib import Path
from typing import Callable

from harness import LOAD_CPU, BenchError, pinned

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def _short(frame: str) -> str:
    found = _FRAME.match(frame)
    if not found:
        return frame
    path = found.group("file")
    for marker in ("site-packages/", "src/", "lib/python3"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{found.group('func')} ({path})"


def fold(folded_text: str) -> tuple[Counter, Counter, int]:
    """Collapsed stacks ("a;b;c 12" per line) -> (self samples, inclusive samples, total)."""
    own: Counter = Counter()
    inclusive: Counter = Counter()
    total = 0
    for line in folded_text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = [_short(f) for f in stack.split(";")]
        frames = [f for f in frames if not f.startswith("process ") and not f.startswith("thread ")]
        if not frames:
            continue
        own[frames[-1]] += n
        for frame in set(frames):
            inclusive[frame] += n
    return own, inclusive, total


def component(frame: str) -> str:
    """Which part of the stack a frame's own time belongs to."""
    where = frame.rsplit("(", 1)[-1].rstrip(")")
    if where.startswith("tokenward/"):
        parts = where.split("/")
        return "tokenward/" + parts[1] if len(parts) > 2 else "tokenward/" + parts[1].split(".")[0]
    if where == "asyncio/runners.py":
        return "event loop (uvloop C code, I/O syscalls)"
    return where.split("/")[0].split(".")[0]


def table(folded_text: str, top: int = 25) -> str:
    own, inclusive, total = fold(folded_text)
    if not total:
        return "(no samples)"
    parts: Counter = Counter()
    for name, n in own.items():
        parts[component(name)] += n
    lines = [f"{total} samples", "", "self %  component"]
    lines += [f"{100 * n / total:6.1f}  {name}" for name, n in parts.most_common(12)]
    lines += ["", "self %  function"]
    lines += [f"{100 * n / total:6.1f}  {name}" for name, n in own.most_common(top)]
    lines += ["", "incl %  function"]
    lines += [f"{100 * n / total:6.1f}  {name}" for name, n in inclusive.most_common(top)]
    return "\n".join(lines)


def profile_during(pid: int, outdir: Path, duration: float, load: Callable[[], dict]) -> dict:
    """Sample ``pid`` with py-spy for ``duration`` seconds while ``load()`` runs."""
    spy = shutil.which("py-spy")
    if spy is None:
        raise BenchError("py-spy is not installed (pip install py-spy)")
    outdir.mkdir(parents=True, exist_ok=True)
    folded = outdir / "gateway.folded"
    argv = pinned(LOAD_CPU, [spy, "record", "--pid", str(pid), "--duration", str(int(duration)),
                             "--rate", "250", "--nonblocking", "--format", "raw", "--output", str(folded)])
    holder: dict = {}
    worker = threading.Thread(target=lambda: holder.update(load=load()))
    worker.start()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 60)
    worker.join(duration + 60)
    if done.returncode != 0 or not folded.exists():
        raise BenchError(f"py-spy failed ({done.returncode}): {done.stderr[-1500:]}")
    summary = table(folded.read_text())
    (outdir / "gateway-top.txt").write_text(summary + "\n")
    return {"folded": str(folded), "top": summary, "load_during_profile": holder.get("load")}


def main() -> None:
    parser = argparse.ArgumentParser(description="fold py-spy raw output into self/inclusive tables")
    parser.add_argument("folded")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    print(table(Path(args.folded).read_text(), args.top))


if __name__ == "__main__":
    main()
