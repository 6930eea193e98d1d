"""A scenario's figure, drawn only from its ``Result``: every line is a series of the JSON,
so what the PNG shows is what the JSON says (a test compares them).

Legible where series coincide: each series has its own colour, dash and marker, the
markers of different series fall on different points, the first series is drawn widest
and each later one narrower on top of it (so lines lying exactly on each other still show
as layered strokes), and a note under the panel's title names the series that coincide.
Vertical marks are labelled in a band of headroom above the data, on a white ground, and
the legend sits beside the panel, so no text lies on a line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import os
import textwrap

from .result import Panel, Result, Series

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

_STYLES = {"-": "-", "--": "--", ":": ":", "-.": "-."}
_MARKERS = ("o", "s", "^", "D", "v", "P", "X")
_HEADROOM = 0.16        # of the data's height, above it, for the marks' labels
_MARKS_PER_LINE = 8


def figure(result: Result) -> Figure:
    """The matplotlib figure of a result (not saved): one panel under another."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    panels = result.panels
    fig = Figure(figsize=(11, 3.8 * len(panels) + 0.6), dpi=90, layout="constrained")
    fig.suptitle(result.title, fontsize=13, fontweight="bold")
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    for ax, panel in zip(axes, panels):
        _draw(ax, panel)
    return fig


def _draw(ax: Axes, panel: Panel) -> None:
    count = len(panel.series)
    for i, series in enumerate(panel.series):
        points = len(series.x)
        step = max(points // _MARKS_PER_LINE, 1)
        ax.plot(series.x, series.y, linestyle=_STYLES.get(series.style, "-"),
                linewidth=1.5 + 2.5 * (count - 1 - i) / max(count - 1, 1), label=series.label,
                marker=_MARKERS[i % len(_MARKERS)], markersize=5.5,
                markevery=(min(i * step // max(count, 1), points - 1) if points else 0, step))
    lo, hi = ax.get_ylim()
    if panel.marks:
        ax.set_ylim(lo, hi + (hi - lo) * _HEADROOM)
    for x, label in panel.marks:
        ax.axvline(x, color="0.45", linewidth=0.9, linestyle=(0, (4, 3)))
        ax.annotate(label, xy=(x, 1.0), xycoords=("data", "axes fraction"), xytext=(3, -4),
                    textcoords="offset points", fontsize=8, color="0.25", va="top",
                    bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.9})
    note = _coinciding(panel)
    title = panel.title + ("\n" + textwrap.fill(f"({note})", 110) if note else "")
    ax.set_title(title, fontsize=11, loc="left")
    ax.set_xlabel(panel.xlabel)
    ax.set_ylabel(panel.ylabel)
    ax.grid(True, alpha=0.3)
    ax.ticklabel_format(axis="y", style="plain", useOffset=False)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), framealpha=0.9)


def _coinciding(panel: Panel) -> str:
    """Which series lie on one another, to the eye (within half a percent of the panel's
    height): '"A" and "B" coincide; "C" lies on them from x = 12' (a series counts when it
    lies on another over its second half or more; none: "")."""
    ys = [v for series in panel.series for v in series.y]
    tolerance = 0.005 * (max(ys) - min(ys)) if ys else 0.0
    groups: list[tuple[Series, list[tuple[str, int]]]] = []   # (leader series, [(label, from index)])
    for series in panel.series:
        for leader, members in groups:
            start = _common_tail(leader, series, tolerance)
            if start is not None:
                members.append((series.label, start))
                break
        else:
            groups.append((series, [(series.label, 0)]))
    phrases = []
    for leader, members in groups:
        whole = [label for label, start in members if start == 0]
        later = [(label, start) for label, start in members if start > 0]
        if len(whole) > 1:
            phrases.append(_names(whole) + " coincide")
        for label, start in later:
            phrases.append(f'"{label}" lies on {_names(whole)} from x = {leader.x[start]:g}')
    return "; ".join(phrases)


def _common_tail(a: Series, b: Series, tolerance: float) -> int | None:
    """The index from which ``b`` lies on ``a`` to the end, if that is half of it or more."""
    if a.x != b.x or not a.x:
        return None
    start = len(a.y)
    while start > 0 and abs(a.y[start - 1] - b.y[start - 1]) <= tolerance:
        start -= 1
    return start if start <= len(a.y) // 2 else None


def _names(labels: list[str]) -> str:
    quoted = [f'"{label}"' for label in labels]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def save(result: Result, path: str | os.PathLike[str]) -> None:
    figure(result).savefig(path, metadata={"Software": None})
