# Local stubs: only what tokenward calls of spaCy (the presidio extra), so that mypy gives one
# answer whether the extra is installed or not. Checked against the installed package by
# tests/unit/test_stubs.py (mypy's stubtest).
from collections.abc import Iterable
from pathlib import Path

from .language import Language as Language

def load(name: str | Path, *, vocab: object = True, disable: str | Iterable[str] = ...,
         enable: str | Iterable[str] = ..., exclude: str | Iterable[str] = ...,
         config: object = ...) -> Language: ...
