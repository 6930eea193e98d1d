"""tokenward/compiled.py: what mypyc compiles (TOKENWARD_COMPILE=1 pip install .) and the
check that refuses a compiled module older than its source."""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path

import pytest

from tokenward import compiled

SRC = Path(compiled.__file__).resolve().parent
ROOT = SRC.parents[1]


def test_every_listed_module_exists_and_holds_nothing_mypyc_cannot_keep():
    """msgspec reads a Struct's annotations from its module (a compiled one keeps none), and
    mypyc cannot compile a subclass of an exception: neither may enter a compiled module."""
    assert len(set(compiled.MODULES)) == len(compiled.MODULES)
    for name in compiled.MODULES:
        tree = ast.parse((SRC / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = {ast.unparse(base) for base in node.bases}
                assert not bases & {"msgspec.Struct", "Struct"}, f"{name}: {node.name} is a msgspec Struct"
                assert not any(b.endswith(("Error", "Exception")) for b in bases), \
                    f"{name}: {node.name} subclasses an exception"


def test_a_pure_install_has_nothing_compiled_and_passes_the_check():
    if compiled.built():
        pytest.skip("this tree is compiled (TOKENWARD_COMPILE=1)")
    compiled.check()


def test_a_compiled_module_whose_source_changed_is_refused(tmp_path, monkeypatch):
    name = compiled.MODULES[0]
    manifest = tmp_path / "compiled.json"
    monkeypatch.setattr(compiled, "MANIFEST", manifest)
    monkeypatch.setattr(compiled, "_extension", lambda module: tmp_path / "x.so" if module == name else None)
    manifest.write_text(json.dumps({name: hashlib.sha256(b"what it was built from").hexdigest()}))
    with pytest.raises(compiled.StaleCompiledModule, match=name.replace("/", ".") + "|" + name):
        compiled.check()
    manifest.write_text(json.dumps({name: compiled.source_digest(name)}))
    compiled.check()   # the same source: fine
    manifest.unlink()
    with pytest.raises(compiled.StaleCompiledModule):   # no record of what it was built from
        compiled.check()


def test_no_python_class_subclasses_a_compiled_one():
    """mypyc refuses an interpreted subclass of a compiled class at run time (a TypeError on
    the request that first makes one): no module left as Python, test or bench subclasses
    a class a listed module defines."""
    defined: dict[str, str] = {}
    for name in compiled.MODULES:
        for node in ast.parse((SRC / f"{name}.py").read_text()).body:
            if isinstance(node, ast.ClassDef):
                defined[node.name] = name
    listed = {SRC / f"{name}.py" for name in compiled.MODULES}
    found = []
    for path in [*ROOT.joinpath("src").rglob("*.py"), *ROOT.joinpath("tests").rglob("*.py"),
                 *ROOT.joinpath("bench").rglob("*.py")]:
        if path in listed:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                for base in node.bases:
                    short = ast.unparse(base).rsplit(".", 1)[-1]
                    if short in defined:
                        found.append(f"{path.relative_to(ROOT)}: {node.name}({short}) of {defined[short]}")
    assert not found, found
