"""The stage modules are named for what they do and numbered in the order they run: reading
stages/order.py, the n-th stage is built by ``build`` of ``stages/sNN_<its name>.py``, with
NN increasing along the order, and every module of stages/ is one of them."""

from __future__ import annotations

import importlib
import pkgutil
import re

from tokenward import stages
from tokenward.stages import order

MODULE = re.compile(r"s(\d\d)_(\w+)")


def test_each_stage_is_built_by_its_own_module_numbered_in_run_order():
    numbers = []
    for slot, build in order.STAGES:
        module = build.__module__.rsplit(".", 1)[1]
        match = MODULE.fullmatch(module)
        assert match is not None, f"stage {slot!r} is built in {module}, not an sNN_<name> module"
        assert match.group(2) == slot, f"stage {slot!r} is built in {module}: the module is named for another"
        assert build.__name__ == "build", f"{module}.{build.__name__}: each module's builder is build"
        numbers.append(int(match.group(1)))
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers), numbers


def test_every_numbered_module_is_a_stage_of_the_order():
    modules = {info.name for info in pkgutil.iter_modules(stages.__path__) if MODULE.fullmatch(info.name)}
    built = {build.__module__.rsplit(".", 1)[1] for _, build in order.STAGES}
    assert modules == built
    for name in modules:   # and each imports (no stale module left behind by a rename)
        importlib.import_module(f"tokenward.stages.{name}")

