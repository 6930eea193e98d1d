"""Running scenarios by name (what ``tokenward lab`` calls)."""

from __future__ import annotations

import asyncio
import importlib
import logging
from typing import Callable

from .result import Result

MODULES = {"flood": "flood", "two-tenants": "two_tenants", "fan-out": "fan_out", "crash": "crash",
           "replicas": "replicas", "window-boundary": "window_boundary"}


def run(name: str, seed: int, tick: Callable[[float], None] = lambda fraction: None) -> Result:
    module = importlib.import_module(f"tokenward.lab.scenarios.{MODULES[name]}")
    quiet = logging.getLogger("tokenward")
    level = quiet.level
    quiet.setLevel(logging.ERROR)   # the reconciler's warnings are the scenario's subject, not news
    try:
        result: Result = asyncio.run(module.run(seed, tick))   # each scenario module's run()
        return result
    finally:
        quiet.setLevel(level)
