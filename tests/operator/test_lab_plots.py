"""The lab's plots stay legible where series coincide: in every panel each series has its
own colour/dash/marker and markers on points of its own, series lying on one another are
named under the panel's title (replicas: three of four lie on one line), the vertical
marks' labels sit in headroom above the data, and the legend beside the panel."""

from __future__ import annotations

import pytest

from tokenward.lab import SCENARIOS, runner
from tokenward.lab.plots import figure

pytest.importorskip("matplotlib")   # the lab extra; scripts/test.sh installs it


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_series_is_told_apart(name):
    fig = figure(runner.run(name, 1))
    fig.canvas.draw()
    for ax in [ax for ax in fig.axes if ax.get_lines()]:
        lines = [line for line in ax.get_lines() if not line.get_label().startswith("_")]
        looks = {(str(line.get_color()), str(line.get_linestyle()), line.get_marker()) for line in lines}
        assert len(looks) == len(lines), looks
        starts = [line.get_markevery()[0] for line in lines]
        assert len(lines) == 1 or len(set(starts)) > 1, starts
        legend = ax.get_legend().get_window_extent()
        assert legend.x0 >= ax.get_window_extent().x1          # beside the panel, never on a line
        top = max(max(line.get_ydata()) for line in lines)
        if any(text.get_text() for text in ax.texts):           # marks: their labels above the data
            label_bottom = min(text.get_window_extent().y0 for text in ax.texts)
            assert ax.transData.transform((0, top))[1] < label_bottom


def test_coinciding_series_are_named():
    fig = figure(runner.run("replicas", 1))
    title = next(ax for ax in fig.axes if ax.get_lines()).get_title(loc="left").replace("\n", " ")
    assert '"3 replicas, one shared store" and "1 replica" coincide' in title
    assert '"the plan: 60,000 a minute (and its first full bucket)" lies on' in title
