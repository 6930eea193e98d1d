"""The budget lab: ``tokenward lab all`` in under a minute, the same JSON for the same seed,
PNGs that hold what the JSON says, and the scenarios' numbers that the admission code must
produce (they run through the real Admitter and job book)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tokenward.lab import SCENARIOS, runner
from tokenward.lab.plots import figure
from tokenward.lab.result import load

matplotlib = pytest.importorskip("matplotlib")   # the lab extra; scripts/test.sh installs it


def lab_all(out: Path, seed: int = 1) -> float:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "tokenward", "lab", "all", "--out", str(out), "--seed", str(seed)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return time.monotonic() - started


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path, float]:
    first, second = tmp_path_factory.mktemp("lab1"), tmp_path_factory.mktemp("lab2")
    elapsed = lab_all(first)
    lab_all(second)
    return first, second, elapsed


def test_lab_all_runs_in_under_a_minute_and_writes_every_file(runs):
    first, _, elapsed = runs
    assert elapsed < 60, elapsed
    for name in SCENARIOS:
        for suffix in (".json", ".png"):
            assert (first / f"{name}{suffix}").exists(), name
    page = (first / "index.html").read_text()
    for name in SCENARIOS:
        assert f'<img src="{name}.png"' in page and f'id="{name}"' in page
        assert "Assumptions" in page


def test_the_same_seed_gives_the_same_json_byte_for_byte(runs, tmp_path):
    first, second, _ = runs
    for name in SCENARIOS:
        assert (first / f"{name}.json").read_bytes() == (second / f"{name}.json").read_bytes(), name
    other = tmp_path / "seed2"
    lab_all(other, seed=2)
    assert any((first / f"{n}.json").read_bytes() != (other / f"{n}.json").read_bytes() for n in SCENARIOS)


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_png_is_not_trivial_and_plots_the_jsons_series(runs, name):
    first, _, _ = runs
    import matplotlib.image

    image = matplotlib.image.imread(first / f"{name}.png")
    assert image.shape[0] > 300 and image.shape[1] > 500
    ink = (image[:, :, :3].mean(axis=2) < 0.9).mean()
    assert ink > 0.02, ink                           # lines, text and axes: not a blank canvas
    written = load((first / f"{name}.json").read_text())
    # the figure of a fresh run of the scenario, before saving: each line is the JSON's series
    fig = figure(runner.run(name, 1))
    axes = [ax for ax in fig.axes if ax.get_lines()]
    assert len(axes) == len(written.panels)
    for ax, panel in zip(axes, written.panels):
        lines = [line for line in ax.get_lines() if line.get_label() and not line.get_label().startswith("_")]
        assert [line.get_label() for line in lines] == [s.label for s in panel.series]
        for line, series in zip(lines, panel.series):
            assert [round(float(v), 4) for v in line.get_xdata()] == series.x
            assert [round(float(v), 4) for v in line.get_ydata()] == series.y
            assert len(series.x) > 5
        assert any(max(s.y) > min(s.y) for s in panel.series)    # something happens in each panel


def test_the_scenarios_say_what_the_admission_code_guarantees(runs):
    first, _, _ = runs
    table = {name: json.loads((first / f"{name}.json").read_text()) for name in SCENARIOS}
    fan = {row[0]: row for row in table["fan-out"]["rows"]}
    assert fan["job budget 100"][8] <= 100 and fan["client makes new jobs"][8] <= 100   # no job above its budget
    assert fan["job budget 100"][1] < fan["no job budget"][1]
    assert fan["client makes up job ids"][1] == 0
    replicas = {row[0]: row for row in table["replicas"]["rows"]}
    assert replicas["3 replicas, one shared store"][3] == 1.0
    assert replicas["3 replicas, process-local limiters"][3] == 3.0
    flood = table["flood"]["rows"]
    assert flood[2][3] <= 400_000 // flood[2][1] + 1              # usage unknown: only the refill admits
    window = {row[0]: row for row in table["window-boundary"]["rows"]}
    assert window["token bucket (the gateway)"][2] <= 60_000 + 1_000 * 1 + 1_000
    assert window["fixed one-minute window"][3] == 120_000
    crash = {row[0]: row for row in table["crash"]["rows"]}
    assert crash["job request, not yet dispatched"][4] == "unused: refunded"
    assert crash["job request, dispatched"][4] == "charged in full"
    shares = {row[0]: row for row in table["two-tenants"]["rows"]}
    pool, shared = shares["single shared pool"], shares["shares A 0.3, B 0.2 + reserve 0.5"]
    assert shared[1] >= pool[1] and shared[3] <= pool[3]


def test_a_missing_matplotlib_says_how_to_install_it(tmp_path):
    code = ("import sys; sys.modules['matplotlib'] = None; sys.argv = ['tokenward', 'lab', 'flood', '--out', "
            f"{str(tmp_path)!r}]; from tokenward.cli.main import main; main()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "pip install -e '.[lab]'" in done.stderr     # from a clone; from the index: tokenward[lab]


def test_an_unknown_scenario_is_named(tmp_path):
    done = subprocess.run([sys.executable, "-m", "tokenward", "lab", "storm", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "unknown scenario 'storm'" in done.stderr
