"""The route label and the decision record's route, old (the raw path) against new (the
template; observe/routes.py), side by side in one process: ns per call of
``GatewayMetrics.observe`` and ``build_record`` for a matched and an unmatched path.

    python bench/label_cost.py --old OLD_SRC --new NEW_SRC

OLD_SRC and NEW_SRC are two copies of ``src/`` that differ in ``observe/metrics.py`` and
``observe/decision_log.py`` only (docs/benchmarks.md took them from one tree, with and
without the change). Best of 7 timeit repeats; a one-off measurement, not a gate.
"""

from __future__ import annotations

import argparse
import importlib.util
import timeit
import types
from pathlib import Path

from tokenward.reconcile.usage import Usage


def _load(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_loader(name, loader=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "tokenward.observe"
    exec(compile(path.read_text(), str(path), "exec"), module.__dict__)
    return module


def _ctx(path: str, matched: bool) -> types.SimpleNamespace:
    return types.SimpleNamespace(
        route=types.SimpleNamespace(path=path) if matched else None, path=path,
        principal=types.SimpleNamespace(tenant="acme", key_id="k1"), deciding_stage="forward", reason=None,
        timings=[("edge", 1000), ("identity", 2000)], usage=Usage(10, 5, "reported"), request_id="r1",
        method="POST", lifecycle=types.SimpleNamespace(state=types.SimpleNamespace(value="done")), status=200,
        model="m", stream=False, upstream_status=200, started_ns=0, notes=None, answered_by=None, screening=None)


def _ns(fn) -> float:
    return min(timeit.repeat(fn, number=20000, repeat=7)) / 20000 * 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", type=Path, required=True)
    parser.add_argument("--new", type=Path, required=True)
    args = parser.parse_args()
    trees = {}
    for label, src in (("old", args.old), ("new", args.new)):
        observe = src / "tokenward" / "observe"
        trees[label] = (_load(observe / "metrics.py", f"tokenward.observe._{label}_metrics").GatewayMetrics().observe,
                        _load(observe / "decision_log.py", f"tokenward.observe._{label}_log").build_record)
    cases = (("matched", _ctx("/v1/chat/completions", True)), ("unmatched", _ctx("/v1/path.x@y.org/x", False)))
    for case, ctx in cases:
        for label, (observe, record) in trees.items():
            print(f"{case} {label} observe {_ns(lambda: observe(ctx)):.0f} ns, "
                  f"build_record {_ns(lambda: record(ctx, 1000)):.0f} ns")


if __name__ == "__main__":
    main()
