"""Keeps modules readable in one sitting: none over 500 lines, no function over 80."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "tokenward"


def test_modules_and_functions_stay_small():
    too_big = []
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text()
        if text.count("\n") > 500:
            too_big.append(f"{path.relative_to(SRC)}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > 80:
                    too_big.append(f"{path.relative_to(SRC)}:{node.name}: {length} lines")
    assert not too_big, too_big
