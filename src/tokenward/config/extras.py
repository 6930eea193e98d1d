"""How to install an optional extra, said the way that works where tokenward was installed
from: ``pip install -e '.[lab]'`` in a clone (an editable install of a source tree), else
``pip install 'tokenward[lab]'`` from the package index."""

from __future__ import annotations

from pathlib import Path


def source_tree() -> Path | None:
    """The clone this package runs from (its pyproject.toml names tokenward), or None."""
    root = Path(__file__).resolve().parents[3]
    pyproject = root / "pyproject.toml"
    try:
        text = pyproject.read_text(encoding="utf-8")
    except OSError:
        return None
    return root if 'name = "tokenward"' in text else None


def install_hint(extra: str) -> str:
    """The pip command that installs ``extra`` here."""
    root = source_tree()
    if root is not None:
        return f"pip install -e '.[{extra}]' (from the root of your tokenward clone)"
    return f"pip install 'tokenward[{extra}]'"
