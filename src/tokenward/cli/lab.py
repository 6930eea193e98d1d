"""``tokenward lab SCENARIO [--out DIR] [--seed N]`` and ``tokenward lab all``: the budget lab.

Prints each scenario's table, shows a progress bar while a run takes long enough to watch
(on a terminal), and writes ``DIR/SCENARIO.json``, ``DIR/SCENARIO.png`` and ``DIR/index.html``.
The plots need matplotlib, an optional extra: ``pip install 'tokenward[lab]'``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from ..lab.result import Result

_UNWRAPPED = 1000   # columns: wider than any table the lab prints


def install_message() -> str:
    from ..config.extras import install_hint

    return f"tokenward lab draws its plots with matplotlib, which is not installed: {install_hint('lab')}"


def lab(
    scenario: str = typer.Argument(..., metavar="SCENARIO",
                                   help="flood, two-tenants, fan-out, crash, replicas, window-boundary, or all"),
    out: Path = typer.Option(Path("lab-out"), "--out", "-o", help="where the JSON, PNG and index.html go"),
    seed: int = typer.Option(1, "--seed", help="the same seed gives the same numbers, byte for byte"),
) -> None:
    """Budget lab: deterministic scenarios run through the real admission code, with plots."""
    from ..lab import SCENARIOS

    names = list(SCENARIOS) if scenario == "all" else [scenario]
    if any(name not in SCENARIOS for name in names):
        print(f"lab: unknown scenario {scenario!r}; one of: {', '.join(SCENARIOS)}, all", file=sys.stderr)
        raise typer.Exit(2)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print(install_message(), file=sys.stderr)
        raise typer.Exit(2) from None
    from rich.console import Console

    console = Console()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        # a file or a pipe has no width to fit: rich's 80-column default would wrap the tables
        console = Console(width=_UNWRAPPED)
    started = time.monotonic()
    for name in names:
        result = _run(console, name, seed, out)
        _table(console, result)
    console.print(f"[dim]wrote {len(names)} scenario(s) to {out}/ (index.html) in "
                  f"{time.monotonic() - started:.1f}s[/dim]")


def _run(console: Console, name: str, seed: int, out: Path) -> Result:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from ..lab import report, runner

    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                  TimeElapsedColumn(), console=console, transient=True,
                  disable=not console.is_terminal) as progress:
        task = progress.add_task(f"lab {name}", total=1.0)
        last = [0.0]

        def tick(fraction: float) -> None:
            if fraction - last[0] >= 0.01:       # a redraw per percent, not per event
                last[0] = fraction
                progress.update(task, completed=min(fraction, 1.0))

        result = runner.run(name, seed, tick)
        progress.update(task, description=f"lab {name}: plotting")
        report.write(result, out)
    return result


def _table(console: Console, result: Result) -> None:
    from rich.table import Table

    from ..lab.report import _cell

    table = Table(title=f"{result.title} ({result.scenario}, seed {result.seed})", title_justify="left")
    for i, column in enumerate(result.columns):
        table.add_column(column, justify="left" if i == 0 else "right", overflow="fold")
    for row in result.rows:
        table.add_row(*(_cell(v).replace("&#x27;", "'") for v in row))
    console.print(table)
    console.print(f"[italic]{result.finding}[/italic]\n")
