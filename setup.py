"""The build: pyproject.toml holds the metadata. With ``TOKENWARD_COMPILE=1`` the hot path
(src/tokenward/compiled.py ``MODULES``) is compiled by mypyc, which needs a C compiler and
mypy at build time; without it nothing is compiled and the package is pure Python.

    TOKENWARD_COMPILE=1 pip install .        # or -e . for a checkout (then rebuild after edits)
"""

from __future__ import annotations

import hashlib
import json
import os
import runpy
from pathlib import Path
from typing import Any

from setuptools import setup

PACKAGE = Path(__file__).resolve().parent / "src" / "tokenward"


def compiled() -> dict[str, Any]:
    if os.environ.get("TOKENWARD_COMPILE") != "1":
        return {}
    try:
        from mypyc.build import mypycify
    except ImportError:   # an isolated build's first pass: pip installs mypy, then builds
        return {"setup_requires": ["mypy>=2.0"]}
    modules = runpy.run_path(str(PACKAGE / "compiled.py"))["MODULES"]
    # what each compiled module was built from: tokenward.compiled.check refuses a stale one
    digests = {name: hashlib.sha256((PACKAGE / f"{name}.py").read_bytes()).hexdigest() for name in modules}
    (PACKAGE / "compiled.json").write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")
    return {"ext_modules": mypycify([f"src/tokenward/{name}.py" for name in modules], opt_level="3")}


setup(**compiled())
