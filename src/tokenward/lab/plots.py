"""A scenario's figure, drawn only from its ``Result``: every line is a series of the JSON,
so what the PNG shows is what the JSON says (a test compares them)."""

from __future__ import annotations

from .result import Result

_STYLES = {"-": "-", "--": "--", ":": ":", "-.": "-."}


def figure(result: Result):
    """The matplotlib figure of a result (not saved): one panel under another."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    panels = result.panels
    fig = Figure(figsize=(8.5, 3.6 * len(panels) + 0.6), dpi=90, layout="constrained")
    fig.suptitle(result.title, fontsize=13, fontweight="bold")
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    for ax, panel in zip(axes, panels):
        for series in panel.series:
            ax.plot(series.x, series.y, linestyle=_STYLES.get(series.style, "-"), linewidth=1.8, label=series.label)
        for x, label in panel.marks:
            ax.axvline(x, color="0.45", linewidth=0.9, linestyle=(0, (4, 3)))
            ax.annotate(label, xy=(x, 1.0), xycoords=("data", "axes fraction"), xytext=(3, -12),
                        textcoords="offset points", fontsize=8, color="0.3")
        ax.set_title(panel.title, fontsize=11, loc="left")
        ax.set_xlabel(panel.xlabel)
        ax.set_ylabel(panel.ylabel)
        ax.grid(True, alpha=0.3)
        ax.ticklabel_format(axis="y", style="plain", useOffset=False)
        ax.legend(fontsize=8, loc="best", framealpha=0.85)
    return fig


def save(result: Result, path) -> None:
    figure(result).savefig(path, metadata={"Software": None})
