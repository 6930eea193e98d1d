"""The status page's HTML, rendered on the server (every value escaped); its one small
script fetches the tenants' part again every two seconds and swaps it in."""

from __future__ import annotations

import datetime as dt
from html import escape
from typing import TypedDict, final

from ..budget.policy import micro_usd, usd_text
from .model import PublicControl


@final   # final: `"error" in row` tells the two kinds of row apart (a TypedDict may have more keys)
class BudgetRow(TypedDict):
    """A budget limit against what is used or held now (control/status.py ``_row``)."""
    limit: str
    enforced: bool
    kind: str                  # rate | held | spend
    used: float
    limit_value: float
    unit: str


@final
class StoreDown(TypedDict):
    """In place of a tenant's rows when the budget store does not answer."""
    limit: str
    error: str


class CacheRate(TypedDict):
    hits: int
    misses: int
    hit_rate: float | None     # None: no lookups yet


class TenantStatus(TypedDict):
    budget: list[BudgetRow] | list[StoreDown]
    open_here: int
    streaming_here: int
    refusals: dict[str, int]          # reason -> count over the window
    refusals_scope: str
    screening: dict[str, int]         # kind:outcome -> count over the window
    controls: list[PublicControl]
    cache: CacheRate


class ReplicaStatus(TypedDict):
    pid: int
    controls_live: bool


class StatusData(TypedDict):
    """The page's numbers, also served whole as ``/admin/status.json``."""
    at: float
    window_s: float
    tenants: dict[str, TenantStatus]
    screening: dict[str, int]         # this replica's outcomes since start
    replica: ReplicaStatus

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#1b1f24}
h1{font-size:1.3em;margin:0 0 .2em} h2{font-size:1.1em;margin:1.2em 0 .4em}
table{border-collapse:collapse;margin:.3em 0 .8em} td,th{border:1px solid #d0d7de;padding:.2em .6em;text-align:left}
th{background:#f6f8fa} .tenant{border:1px solid #d0d7de;border-radius:6px;padding:.2em 1em}
#tenants{display:grid;grid-template-columns:repeat(auto-fill,minmax(540px,1fr));gap:1em;align-items:start}
h3{font-size:1em;margin:.8em 0 .2em} .wide{grid-column:1/-1}
.muted{color:#57606a} .bad{color:#b42318;font-weight:600} .ok{color:#1a7f37}
.bar{display:inline-block;height:.7em;background:#0969da;vertical-align:middle}
"""

_SCRIPT = """
const tenants = document.getElementById('tenants');
const stamp = document.getElementById('updated');
async function refresh() {
  try {
    // from location.origin: a page opened as https://user:token@host/... has credentials in
    // its own URL, and fetch refuses a relative URL resolved against such a base
    const url = new URL(location.pathname + '?fragment=1', location.origin);
    const resp = await fetch(url, {credentials: 'same-origin', cache: 'no-store'});
    if (resp.ok) { tenants.innerHTML = await resp.text(); stamp.textContent = new Date().toLocaleTimeString(); }
    else { stamp.textContent = 'update failed: HTTP ' + resp.status; }
  } catch (err) { stamp.textContent = 'update failed: ' + err; }
}
setInterval(refresh, 2000);
"""


def _table(head: list[str], rows: list[list[str]], empty: str) -> str:
    if not rows:
        return f'<p class="muted">{escape(empty)}</p>'
    cells = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><tr>{cells}</tr>{body}</table>"


def _when(ts: float | None) -> str:
    if ts is None:
        return "until cleared"
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _budget(rows: list[BudgetRow] | list[StoreDown]) -> str:
    out = []
    for row in rows:
        if "error" in row:
            return f'<p class="bad">budget store unavailable: {escape(row["error"])}</p>'
        limit = row["limit_value"] or 0
        share = min(1.0, row["used"] / limit) if limit else 0.0
        bar = f'<span class="bar" style="width:{max(1, int(share * 120))}px"></span>'
        shadow = " (shadow)" if not row["enforced"] else ""
        if row["kind"] == "spend":   # USD, written as `tokenward budget show` writes it
            amounts = f"{usd_text(micro_usd(row['used']))} of {usd_text(micro_usd(limit))}"
        else:
            amounts = f"{int(row['used']):,} of {limit:,} {escape(row['unit'])}"
        out.append([escape(row["limit"]) + shadow, f"{bar} {amounts}"])
    return _table(["limit", "used or held now, of the limit"], out, "no budget limits")


def _controls(controls: list[PublicControl]) -> str:
    rows = []
    for c in controls:
        what = c["kind"] + (f" {c['capability']}" if c.get("capability") else "")
        if c.get("shadow"):
            what += " (shadow)"
        cls = "bad" if c["kind"] in ("suspend", "pause") and not c.get("shadow") else ""
        by = "automatic" + (f" (rule {c['rule']})" if c.get("rule") else "") if c.get("automatic") else c["by"]
        rows.append([f'<span class="{cls}">{escape(what)}</span>', escape(c["scope"]), escape(by),
                     escape(c.get("reason") or ""), escape(_when(c.get("until")))])
    return _table(["action", "on", "by", "reason", "until"], rows, "no actions, pauses or exemptions in force")


def _counts(title: str, counts: dict[str, int], empty: str) -> str:
    rows = [[escape(str(name)), f"{count:,}"] for name, count in counts.items()]
    return _table([title, "count"], rows, empty)


def _tenant(name: str, t: TenantStatus, window_s: float) -> str:
    cache = t["cache"]
    rate = "no lookups yet" if cache["hit_rate"] is None else f"{cache['hit_rate'] * 100:.1f}% of {cache['hits'] + cache['misses']:,} lookups"
    minutes = int(window_s // 60)
    return (f'<section class="tenant" data-tenant="{escape(name)}"><h2>{escape(name)}</h2>'
            f'<p>open requests on this replica: <b>{t["open_here"]}</b> ({t["streaming_here"]} streaming)'
            f' &middot; cache hit rate (this replica): {rate}</p>'
            f"<h3>Budget</h3>{_budget(t['budget'])}"
            f"<h3>Actions, pauses and exemptions</h3><div class=\"controls\">{_controls(t['controls'])}</div>"
            f"<h3>Refusals by reason, last {minutes} min ({escape(t['refusals_scope'])})</h3>"
            f"{_counts('reason', t['refusals'], 'no refusals')}"
            f"<h3>Screening outcomes, last {minutes} min ({escape(t['refusals_scope'])})</h3>"
            f"{_counts('outcome', t['screening'], 'none recorded')}"
            "</section>")


def tenants_fragment(data: StatusData) -> str:
    return "".join(_tenant(name, t, data["window_s"]) for name, t in data["tenants"].items()) + (
        f'<section class="wide"><h2>Screening outcomes (this replica, since start)</h2>'
        f"{_counts('outcome', data['screening'], 'no screening yet')}</section>")


def page(data: StatusData, nonce: str) -> str:
    live = "live" if data["replica"]["controls_live"] else "polled"
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<title>tokenward status</title>"
            f"<style>{_STYLE}</style></head><body>"
            "<h1>tokenward status</h1>"
            f'<p class="muted">replica pid {data["replica"]["pid"]}; controls {live}; updated '
            f'<span id="updated">{escape(_when(data["at"]))}</span></p>'
            f'<div id="tenants">{tenants_fragment(data)}</div>'
            f'<script nonce="{escape(nonce)}">{_SCRIPT}</script></body></html>')

