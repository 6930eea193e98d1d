"""The ``tokenward`` command line (``python -m tokenward`` is the same)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from ..config import load_config
from ..config.schema import Config
from ..errors import ConfigError
from .budget import budget_app
from .controls import abuse_app, tenants_app
from .keys import keys_app
from .lab import lab
from .options import CONFIG_ENV, config_from_env, config_option

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="tokenward: an LLM ingress gateway that admits work, not requests.")
app.add_typer(keys_app, name="keys")
app.add_typer(budget_app, name="budget")
app.add_typer(tenants_app, name="tenants")
app.add_typer(abuse_app, name="abuse")
app.command("lab")(lab)


def _print_version(value: bool) -> None:
    if value:
        print(f"tokenward {version()}")
        raise typer.Exit(0)


def version() -> str:
    """The installed distribution's version (the package's own when run from a source tree)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    from .. import __version__

    try:
        return dist_version("tokenward")
    except PackageNotFoundError:
        return __version__


@app.callback()
def _root(_version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                        help="print the version and exit")) -> None:
    """tokenward: an LLM ingress gateway that admits work, not requests."""


def _load_or_exit(path: Path) -> Config:
    """The config, loaded and verified exactly as ``serve`` and ``check-config`` both need
    (cli/check.py); else ``FILE: path: message`` on stderr and exit 2."""
    from .check import verify_config

    try:
        cfg = load_config(path)
        verify_config(cfg)
    except ConfigError as exc:
        import os

        from ..config.loader import env_source

        env = env_source(exc.path, os.environ)
        # a deployment override's bad value is the variable's, not the file's
        where = f"{env} (environment, overrides {exc.path})" if env else f"{path}: {exc.path}"
        print(f"{where}: {exc.message}" if exc.path else f"{path}: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    return cfg


@app.command()
def serve(
    config: Path = config_option(),
    host: Optional[str] = typer.Option(None, help="listen address (default: server.host)"),
    port: Optional[int] = typer.Option(None, help="listen port, 0 = any free port (default: server.port)"),
    workers: Optional[int] = typer.Option(None, help="worker processes (default: server.workers)"),
) -> None:
    """Run the gateway. Exit 2: the config is refused (the same checks as check-config);
    exit 3: it could not start (the port is taken, the key store cannot be opened), one line
    on stderr. A budget store or backend that does not answer does not stop it: requests
    are refused (budget_store_unavailable, upstream_unavailable) and /readyz is 503 naming
    it until it answers. check-config --connect tries each of them first."""
    from .serve import serve as run

    cfg = _load_or_exit(config)
    port = cfg.server.port if port is None else _in_range("port", port)
    workers = cfg.server.workers if workers is None else _in_range("workers", workers)
    _workers_fit_store(cfg, workers)
    run(cfg, host or cfg.server.host, port, workers, config)


def _workers_fit_store(cfg: Config, workers: int) -> None:
    from .check import check_workers
    from ..errors import ConfigError

    try:
        check_workers(cfg, workers)
    except ConfigError as exc:
        print(f"--workers: {exc.message}", file=sys.stderr)
        raise typer.Exit(2) from None


def _in_range(option: str, value: int) -> int:
    """A command-line override, held to its config field's range (server.port, server.workers)."""
    from ..config.schema import RANGES, ServerConfig

    bound = RANGES[ServerConfig][option]
    if not bound.holds(value):
        print(f"--{option}: {bound.describe()}", file=sys.stderr)
        raise typer.Exit(2)
    return value


@app.command("check-config")
def check_config(
    config_arg: Optional[Path] = typer.Argument(None, metavar="[CONFIG]", help="YAML config file"),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="YAML config file (or as the argument)"),
    connect: bool = typer.Option(False, "--connect", help="also reach every store (key, budget, cache, abuse) "
                                 "and every upstream, as serve would; exit 3 if one cannot be reached"),
) -> None:
    """Validate a config with every check serve makes before it starts (no network I/O
    unless --connect); exit 2 naming the bad key. Warnings go to stderr and keep exit 0."""
    import os

    from .check import config_warnings

    if config_arg is not None and config is not None and config_arg != config:
        print("check-config: give the config file once (as an argument or with --config)", file=sys.stderr)
        raise typer.Exit(2)
    config = config or config_arg or config_from_env()
    if config is None:
        print(f"check-config: missing the config file (check-config --config FILE, or set {CONFIG_ENV})",
              file=sys.stderr)
        raise typer.Exit(2)
    cfg = _load_or_exit(config)
    for warning in config_warnings(cfg, os.environ):
        print(f"{config}: warning: {warning}", file=sys.stderr)
    print(f"{config}: ok ({len(cfg.models)} models, {len(cfg.plans)} plans, {len(cfg.tenants)} tenants)")
    if connect:
        from .connect import connect_check

        if not connect_check(cfg):
            raise typer.Exit(3)


@app.command("routes")
def routes(
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="YAML config file"),
) -> None:
    """Every method and path a gateway started with this config answers, each once, and what
    answers it: the gateway's own routes, the admin API, agent jobs, and each configured route
    with the stages that run on it. Opens the stores as serve would (exit 3 naming one that
    cannot be reached)."""
    import asyncio

    from ..config.stores import StoreStartError
    from .routes import routing_lines

    config = config or config_from_env()
    if config is None:
        print(f"routes: missing the config file (routes --config FILE, or set {CONFIG_ENV})", file=sys.stderr)
        raise typer.Exit(2)
    cfg = _load_or_exit(config)
    try:
        lines = asyncio.run(routing_lines(cfg))
    except StoreStartError as exc:
        print(f"tokenward: {exc}", file=sys.stderr)
        raise typer.Exit(3) from None
    print("\n".join(lines))


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
