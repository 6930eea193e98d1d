"""The dialects package stays sans-IO: nothing from the pipeline's stages, the app, the
services or the HTTP server, and no module that does I/O or reads the clock."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "tokenward" / "dialects"
FORBIDDEN_INTERNAL = ("stages", "app", "services", "http", "pipeline", "budget", "cache", "jobs", "control")
FORBIDDEN_STDLIB = ("socket", "asyncio", "httpx", "os", "time", "threading", "subprocess", "urllib", "logging")
# the ASGI callables' types (Send, for the dialect's exit): type aliases only, nothing runs
ALLOWED = ("tokenward.http.asgi",)


def imports(path: Path) -> list[str]:
    """Every module a file imports, inside functions too; relative ones as ``tokenward.X``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                out.append(node.module or "")
            elif node.level == 1:
                out.append(f"tokenward.dialects.{node.module or ''}")
            else:
                out.append(f"tokenward.{node.module or ''}")
    return out


def test_no_io_and_no_pipeline_imports():
    modules = sorted(PACKAGE.glob("*.py"))
    assert len(modules) >= 10
    bad = []
    for path in modules:
        for name in imports(path):
            top = name.split(".")
            if name in ALLOWED:
                continue
            if top[0] in FORBIDDEN_STDLIB or (top[0] == "tokenward" and len(top) > 1
                                              and top[1] in FORBIDDEN_INTERNAL):
                bad.append(f"{path.name}: {name}")
    assert bad == []
