# Local stubs: only what tokenward calls of tldextract (the presidio extra), so that mypy
# gives one answer whether the extra is installed or not. Checked against the installed
# package by tests/unit/test_stubs.py (mypy's stubtest).
from .tldextract import ExtractResult as ExtractResult
from .tldextract import TLDExtract as TLDExtract
