"""The hot path compiled with mypyc, where the install asks for it; the check that no
compiled module is older than its source.

``TOKENWARD_COMPILE=1 pip install .`` (a C compiler and mypy at build time: setup.py)
compiles ``MODULES`` into extension modules next to their sources; a plain ``pip install``
builds none and runs the same modules as Python, so an install stays one command on a
machine without a compiler. The modules are typed strictly (mypy), which is what mypyc
reads: compiled, they cost ~1/3 fewer instructions per request (docs/benchmarks.md,
"A compiled hot path"). What they may not hold: a msgspec ``Struct`` (msgspec reads its
annotations from the module, which a compiled module does not keep), a subclass of an
exception, or a class that Python code subclasses; a class whose instances get
methods set from outside stays Python too (``tokenize/counters.py``). ``upstream/affinity.py``
is left out: only a pool routed by prefix runs it, and its unit tests hand it a stand-in
context, which compiled code refuses. A class the hot path uses from a module that must stay
Python moves to a module of its own, re-exported where it was (``budget/layout.py``,
``validation/findings.py``), or what it runs per event moves to one
(``reconcile/choice_counts.py``, for ``reconcile/stream_usage.py``, whose tests subclass
``StreamUsage``), or the Structs move out instead (``wire/peek_fields.py`` beside
``wire/request_body.py``; ``reconcile/usage.py`` beside ``reconcile/usage_bounds.py``); a module
constant read per request is ``Final`` (mypyc reads any other module name, an imported one
too, with a dict lookup per use: read it through a local in a loop).

A compiled module is imported in preference to its ``.py``, so editing the source of one
would change nothing until the next build. ``check`` compares each compiled module's
source with the SHA-256 recorded when it was built (``compiled.json``, written by
setup.py) and refuses to start a gateway on a stale one.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import json
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
MANIFEST = PACKAGE / "compiled.json"

# What a request runs through, in the order of docs/architecture.md's walk
MODULES: tuple[str, ...] = (
    "app",
    "http/server", "http/head", "http/limits", "http/ending", "http/state", "http/bodies",
    "http/cycle", "http/responses",
    "pipeline/runner", "pipeline/context", "pipeline/lifecycle", "pipeline/outbound", "pipeline/disconnect",
    "pipeline/bounds", "pipeline/coroutines",
    "stages/s02_edge", "stages/s03_identity", "stages/s06_entitlement", "stages/s07_control",
    "stages/s08_validation", "stages/s09_work", "stages/s10_admission",
    "identity/apikeys", "keys/format", "keys/cache",
    "validation/request", "validation/bounds", "validation/messages", "validation/extensions",
    "validation/structured", "validation/bounded", "validation/normalize", "validation/findings",
    "tokenize/requests",
    "budget/policy", "budget/memory", "budget/admission", "budget/limits", "budget/leases", "budget/layout",
    "budget/redis", "budget/redis_jobs", "budget/resp",
    "control/streams", "control/metrics",
    "upstream/forward", "upstream/prepare", "upstream/targets", "upstream/pool", "upstream/routing",
    "upstream/failover", "upstream/usage_report", "reconcile/usage_bounds", "wire/request_body",
    "upstream/client", "upstream/_conn", "upstream/deadlines", "upstream/stream_clock", "upstream/stream_relay",
    "observe/metrics", "observe/decision_log", "observe/routes", "abuse/observe", "abuse/batch",
    "keys/last_used",
    "wire/sse", "reconcile/choice_counts", "writes",
)


class StaleCompiledModule(RuntimeError):
    pass


def built() -> list[str]:
    """The modules of ``MODULES`` compiled in this install (an extension module beside the source)."""
    return [name for name in MODULES if _extension(name) is not None]


def check() -> None:
    """Raise ``StaleCompiledModule`` if a compiled module's source changed since it was built."""
    compiled = built()
    if not compiled:
        return
    try:
        recorded = json.loads(MANIFEST.read_text())
    except (OSError, ValueError):
        recorded = {}
    stale = [name for name in compiled if recorded.get(name) != source_digest(name)]
    if stale:
        raise StaleCompiledModule(
            f"compiled module(s) {', '.join(stale)} no longer match their source: rebuild "
            "(TOKENWARD_COMPILE=1 pip install .) or delete the extension modules (tokenward/**/*.so)")


def source_digest(name: str) -> str:
    return hashlib.sha256((PACKAGE / f"{name}.py").read_bytes()).hexdigest()


def _extension(name: str) -> Path | None:
    folder = PACKAGE / name
    stem = folder.name
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = folder.with_name(stem + suffix)
        if path.is_file():
            return path
    return None
