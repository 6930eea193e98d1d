"""stubs/ (our own stubs of the optional extras' packages, on mypy's path) says what the
installed packages really have: mypy's stubtest compares every name and signature the stubs
declare with the package at run time. A package whose extra is not installed is skipped;
with none installed (a venv with only ``.[test]``) there is nothing to compare.

stubs/stubtest-allowlist.txt lists the differences that do not matter, each with why.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STUBS = ROOT / "stubs"


def _stubbed() -> list[str]:
    return sorted(p.name for p in STUBS.iterdir() if p.is_dir() and (p / "__init__.pyi").is_file())


def test_every_stubbed_package_is_an_optional_extra_of_ours():
    """A stub must not shadow a package every install has (its own types would be lost)."""
    text = (ROOT / "pyproject.toml").read_text()
    base = text[text.index("dependencies = ["):text.index("[project.optional-dependencies]")]
    names = {"safetensors": "safetensors", "onnx": "onnx", "onnxruntime": "onnxruntime",
             "tldextract": "tldextract", "phonenumbers": "phonenumbers", "matplotlib": "matplotlib",
             "spacy": "spacy", "presidio_analyzer": "presidio-analyzer"}
    assert set(_stubbed()) == set(names)
    for module, dist in names.items():
        assert f'"{dist}' not in base, f"{dist} is a base dependency: it needs no stub of ours"
        assert f'"{dist}' in text, f"{dist} is in no extra of pyproject.toml"


def test_the_stubs_match_the_installed_packages(tmp_path):
    installed = [name for name in _stubbed() if importlib.util.find_spec(name) is not None]
    if not installed:
        pytest.skip("none of the optional extras is installed")
    config = tmp_path / "mypy.ini"
    config.write_text(f"[mypy]\nmypy_path = {STUBS}\n")
    run = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "--ignore-missing-stub", "--ignore-unused-allowlist",
         "--allowlist", str(STUBS / "stubtest-allowlist.txt"), "--mypy-config-file", str(config), *installed],
        capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
