"""Options several commands share, declared once so they read the same everywhere.

``--config`` falls back to the ``TOKENWARD_CONFIG`` environment variable on every command
that takes it (serve, check-config, keys, budget, tenants, abuse): an operator sets it once
per shell or deployment instead of repeating the path.
"""

from __future__ import annotations

import os
from pathlib import Path

import typer

CONFIG_ENV = "TOKENWARD_CONFIG"


def config_option(help: str = "YAML config file (default: $TOKENWARD_CONFIG)") -> Path:
    """A required ``--config``/``-c`` that reads ``TOKENWARD_CONFIG`` when not given."""
    result: Path = typer.Option(..., "--config", "-c", envvar=CONFIG_ENV, show_envvar=True, help=help)
    return result


def config_from_env() -> Path | None:
    """``TOKENWARD_CONFIG`` as a path, or None when unset or empty."""
    value = os.environ.get(CONFIG_ENV, "").strip()
    return Path(value) if value else None
