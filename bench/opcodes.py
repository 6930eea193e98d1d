"""Python bytecodes executed per request, by function: where bench/instructions.py's
count goes, in the gateway's own terms.

    python bench/opcodes.py [--config full] [--requests 200] [--top 40]

callgrind counts machine instructions but sees only the interpreter's C functions;
cProfile sees Python functions but its own cost per call distorts them (a function called
often looks dearer than it is). Here every bytecode the interpreter runs for the timed
requests is counted against its function (``sys.settrace`` with ``f_trace_opcodes``),
after bench/inproc.py's warm-up: a count that does not move with the host, like
callgrind's, and is as fine as one function. It leaves out what C does inside a call (a
JSON decode, a hash): a function whose own count is small can still be dear, so read it
next to instructions.py, not instead of it.
"""

from __future__ import annotations

import argparse
import collections
import inspect
import sys
import types
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import inproc  # noqa: E402


def _where(code: types.CodeType) -> str:
    path = code.co_filename
    marker = "/tokenward/"
    short = path[path.rindex(marker) + len(marker):] if marker in path else Path(path).name
    return f"{short}:{code.co_firstlineno}({code.co_qualname})"


async def count(gateway: Any, args: argparse.Namespace, config_path: Path) -> None:
    inproc.stub_pools(gateway, 0)
    body = inproc.BODY
    api_key = await inproc.key_if_needed(gateway, inproc.make_scope(None, body), body, config_path)
    scope = inproc.make_scope(api_key, body)
    for _ in range(args.warmup):
        await inproc.one_request(gateway, scope, body, [])
    own: collections.Counter[types.CodeType] = collections.Counter()
    calls: collections.Counter[types.CodeType] = collections.Counter()

    def trace(frame: types.FrameType, event: str, arg: Any) -> Any:
        if event == "call":
            calls[frame.f_code] += 1
            frame.f_trace_opcodes = True
            frame.f_trace_lines = False
            return trace
        if event == "opcode":
            own[frame.f_code] += 1
        return trace

    sys.settrace(trace)
    try:
        for _ in range(args.requests):
            await inproc.one_request(gateway, scope, body, [])
    finally:
        sys.settrace(None)
    total = sum(own.values())
    n = args.requests
    print(f"{total / n:,.0f} bytecodes per request in {len(own)} functions "
          f"({sum(calls.values()) / n:,.1f} Python calls, coroutine resumptions included)")
    coroutines = sum(n for code, n in calls.items() if code.co_flags & inspect.CO_COROUTINE)
    print(f"of which {coroutines / n:,.1f} entries into coroutines (first calls and resumptions)")
    print(f"{'bytecodes':>10} {'calls':>7}  function")
    for code, ops in own.most_common(args.top):
        print(f"{ops / n:10.1f} {calls[code] / n:7.2f}  {_where(code)}")
    if args.by_file:
        files: collections.Counter[str] = collections.Counter()
        for code, ops in own.items():
            files[_where(code).split(":")[0]] += ops
        print(f"\n{'bytecodes':>10}  module")
        for name, ops in files.most_common(args.top):
            print(f"{ops / n:10.1f}  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", choices=("foundation", "full"), default="full")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--by-file", action="store_true", help="also the total per module")
    args = parser.parse_args()
    # inproc.run builds the gateway as instructions.py does (--deterministic), then calls measure
    inproc.measure = lambda gateway, _args, config_path: count(gateway, args, config_path)  # type: ignore[assignment]
    run_args = argparse.Namespace(config=args.config, stages=None, store=None, deterministic=True)
    import uvloop

    uvloop.run(inproc.run(run_args))


if __name__ == "__main__":
    main()
