"""The ``tokenward`` command line (``python -m tokenward`` is the same)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from ..config import load_config
from ..errors import ConfigError
from .budget import budget_app
from .keys import keys_app

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="tokenward: an LLM ingress gateway that admits work, not requests.")
app.add_typer(keys_app, name="keys")
app.add_typer(budget_app, name="budget")


def _load_or_exit(path: Path):
    try:
        return load_config(path)
    except ConfigError as exc:
        print(f"{path}: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None


@app.command()
def serve(
    config: Path = typer.Option(..., "--config", "-c", help="YAML config file"),
    host: Optional[str] = typer.Option(None, help="listen address (default: server.host)"),
    port: Optional[int] = typer.Option(None, help="listen port, 0 = any free port (default: server.port)"),
    workers: Optional[int] = typer.Option(None, help="worker processes (default: server.workers)"),
) -> None:
    """Run the gateway."""
    from .serve import serve as run

    cfg = _load_or_exit(config)
    run(cfg, host or cfg.server.host, cfg.server.port if port is None else port,
        cfg.server.workers if workers is None else workers)


@app.command("check-config")
def check_config(config: Path = typer.Argument(..., help="YAML config file")) -> None:
    """Validate a config with the loader serve uses; exit 2 naming the bad key."""
    cfg = _load_or_exit(config)
    print(f"{config}: ok ({len(cfg.models)} models, {len(cfg.plans)} plans, {len(cfg.tenants)} tenants)")


@app.command("mock-upstream")
def mock_upstream(
    host: str = typer.Option("127.0.0.1", help="listen address"),
    port: int = typer.Option(9100, help="listen port, 0 = any free port"),
) -> None:
    """Run a fake OpenAI-compatible backend for demos and tests."""
    from ..mock.server import run_mock

    run_mock(host, port)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
