"""``quality_pareto.png`` (issue 32): accuracy against J per correct answer across a sweep's
configurations, tested on the drawn artists: the front's points are the planted non-dominated
ones, and the bars span the planted intervals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from report import quality_synth as qs
from report import report_synth as synth

from llem.report.build import build_report
from llem.report.plots import draw
from llem.report.plots.quality import QUALITY_PLOT

#: the planted (accuracy %, J per correct answer) of quality_synth.PLANTED, and the bars' ends:
#: the accuracy's interval in %, and J/correct ± its bound (one run each: no CI over repeats)
POINTS = {
    (1, "none"): ((75.0, 40.0), (63.0, 84.0), (38.0, 42.0)),
    (4, "none"): ((75.0, 12.0), (63.0, 84.0), (11.4, 12.6)),
    (1, "bnb-4bit"): ((50.0, 90.0), (38.0, 62.0), (86.0, 94.0)),
    (4, "bnb-4bit"): ((62.5, 10.0), (50.0, 73.0), (9.5, 10.5)),
}
FRONT = [(62.5, 10.0), (75.0, 12.0)]  # by accuracy: (4, bnb-4bit), (4, none)


@pytest.fixture
def quality_sweep(tmp_path: Path) -> Path:
    sweep = tmp_path / "sweep"
    qs.write_quality_sweep(sweep)
    return sweep


def _segments(ax: Any) -> list[np.ndarray]:
    out = []
    for collection in ax.collections:
        out += [np.asarray(s) for s in getattr(collection, "get_segments", lambda: [])()]
    return out


def test_the_front_is_the_planted_non_dominated_configurations(quality_sweep: Path) -> None:
    plots, _ = synth.prepared_plots(quality_sweep)
    plot = plots[QUALITY_PLOT]
    assert [(p.x, p.y) for p in plot.front] == FRONT
    assert sorted((p.x, p.y) for p in plot.dominated) == [(50.0, 90.0), (75.0, 40.0)]
    ax = draw(plot).axes[0]
    (front_line,) = [line for line in ax.lines if len(line.get_xdata()) == len(FRONT)]
    assert list(zip(front_line.get_xdata(), front_line.get_ydata(), strict=True)) == FRONT
    front_marks = [c for c in ax.collections if c.get_label() == "Pareto front"]
    assert sorted(map(tuple, front_marks[0].get_offsets().tolist())) == FRONT
    strong = [t.get_text() for t in ax.texts if t.get_fontsize() == 8]
    assert strong == ["batch_size=4\nquantization=bnb-4bit", "batch_size=4\nquantization=none"]


def test_the_bars_span_the_planted_intervals_on_both_axes(quality_sweep: Path) -> None:
    plots, _ = synth.prepared_plots(quality_sweep)
    ax = draw(plots[QUALITY_PLOT]).axes[0]
    segments = _segments(ax)
    for (x, y), (x_lo, x_hi), (y_lo, y_hi) in POINTS.values():
        across = [
            s
            for s in segments
            if np.allclose(s[:, 1], y) and np.isclose(s[:, 0].mean(), x, atol=20)
        ]
        assert any(np.allclose(sorted(s[:, 0]), [x_lo, x_hi]) for s in across), (x, y)
        upright = [s for s in segments if np.allclose(s[:, 0], x)]
        assert any(np.allclose(sorted(s[:, 1]), [y_lo, y_hi]) for s in upright), (x, y)


def test_the_subtitle_says_which_energy_and_what_the_bars_are(quality_sweep: Path) -> None:
    plots, _ = synth.prepared_plots(quality_sweep)
    ax = draw(plots[QUALITY_PLOT]).axes[0]
    note = ax.get_title(loc="left").replace("\n", " ")
    assert note.startswith("J per correct answer: what a right answer costs")
    assert "accuracy's 95% interval" in note and "CI over repeats + worst-case bound" in note
    assert ax.get_xlabel().startswith("accuracy, %") and "per correct answer" in ax.get_ylabel()


@pytest.mark.slow
def test_a_sweep_report_writes_the_plot_and_one_without_quality_does_not(
    quality_sweep: Path, realistic_sweep: Path
) -> None:
    report = build_report([quality_sweep])
    assert (quality_sweep / "plots" / QUALITY_PLOT).is_file()
    assert quality_sweep / "plots" / QUALITY_PLOT in report.files
    plain = build_report([realistic_sweep])
    assert not (realistic_sweep / "plots" / QUALITY_PLOT).exists()
    assert not [s for s in plain.skipped if QUALITY_PLOT in s]


def test_scored_runs_without_energy_skip_the_plot_and_say_why(tmp_path: Path) -> None:
    def cpu(point: dict[str, Any]) -> dict[str, Any]:
        result = qs.quality_result(0.5 + 0.1 * point["pytorch.batch_size"], (0.4, 0.8))
        cpu_run = synth.ok_result(energy=False)
        result.update(energy=cpu_run["energy"], validity=cpu_run["validity"])
        return result

    synth.write_sweep(tmp_path / "s", {"pytorch.batch_size": [1, 2]}, cpu)
    plots, skipped = synth.prepared_plots(tmp_path / "s")
    assert QUALITY_PLOT not in plots
    (line,) = [s for s in skipped if s.startswith(QUALITY_PLOT)]
    assert "2 scored, 0 with both" in line and "needs measured energy" in line
