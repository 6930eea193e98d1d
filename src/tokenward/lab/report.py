"""Writing a lab run: ``DIR/SCENARIO.json`` (the numbers), ``DIR/SCENARIO.png`` (the plot) and
``DIR/index.html`` (every scenario found in DIR, with the assumptions behind each)."""

from __future__ import annotations

import html
from pathlib import Path

from . import SCENARIOS
from .result import Result, load


def write(result: Result, out: Path) -> None:
    from .plots import save

    out.mkdir(parents=True, exist_ok=True)
    (out / f"{result.scenario}.json").write_text(result.to_json())
    save(result, out / f"{result.scenario}.png")
    write_index(out)


def write_index(out: Path) -> None:
    results = [load((out / f"{name}.json").read_text()) for name in SCENARIOS if (out / f"{name}.json").exists()]
    sections = "\n".join(_section(r) for r in results)
    contents = "".join(f'<li><a href="#{r.scenario}">{html.escape(r.title)}</a></li>' for r in results)
    (out / "index.html").write_text(f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>tokenward budget lab</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; color: #222; }}
table {{ border-collapse: collapse; margin: 1rem 0; font-size: 0.9rem; }}
th, td {{ border: 1px solid #ccc; padding: 0.3rem 0.6rem; text-align: right; }}
th:first-child, td:first-child {{ text-align: left; }}
th {{ background: #f3f3f3; }}
img {{ max-width: 100%; border: 1px solid #ddd; }}
.question {{ font-style: italic; }} .finding {{ background: #f6f8ee; padding: 0.6rem; }}
</style></head><body>
<h1>tokenward budget lab</h1>
<p>Deterministic scenarios run through the gateway's own admission code (its <code>Admitter</code> and job
book on the in-memory budget store) with a simulated clock: the same seed gives the same numbers.
Regenerate with <code>tokenward lab all --out DIR --seed N</code>.</p>
<ul>{contents}</ul>
{sections}
</body></html>
""")


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".")
    if isinstance(value, int):
        return f"{value:,}"
    return html.escape("" if value is None else str(value))


def _section(r: Result) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in r.columns)
    body = "".join("<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in row) + "</tr>" for row in r.rows)
    assumptions = "".join(f"<li>{html.escape(a)}</li>" for a in r.assumptions)
    return f"""<section id="{r.scenario}">
<h2>{html.escape(r.title)} <small>(<code>{r.scenario}</code>, seed {r.seed})</small></h2>
<p class="question">{html.escape(r.question)}</p>
<h3>Assumptions</h3><ul>{assumptions}</ul>
<table><tr>{head}</tr>{body}</table>
<p class="finding">{html.escape(r.finding)}</p>
<img src="{r.scenario}.png" alt="{html.escape(r.title)}">
</section>"""
