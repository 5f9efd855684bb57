"""The report of a power-limit sweep: J/token and tokens/s against the limit, in watts."""

from __future__ import annotations

from pathlib import Path

import pytest
from report import report_synth as synth

from llem.report.load import load_runs
from llem.report.plots import JTOK, TOKS, knob_figure
from llem.report.stats import summary_frame

LIMITS = [200, 300, 400, 700]


def _summary(tmp_path: Path):
    synth.write_sweep(
        tmp_path / "s",
        {"gpu.power_limit_w": LIMITS},
        lambda p: synth.ok_result(
            tok_s=p["gpu.power_limit_w"] / 10, j_tok=1.0 + 100 / p["gpu.power_limit_w"]
        ),
        repeats=2,
    )
    runs = load_runs([tmp_path / "s"])
    return runs, summary_frame(runs)


@pytest.mark.parametrize(
    "metric,ys,ylabel",
    [
        (TOKS, [20.0, 30.0, 40.0, 70.0], "throughput (output tokens/s)"),
        (JTOK, [1.5, 1 + 1 / 3, 1.25, 1 + 1 / 7], None),
    ],
)
def test_j_per_token_and_tokens_per_s_against_the_power_limit(tmp_path, metric, ys, ylabel):
    runs, summary = _summary(tmp_path)
    assert runs.knobs == ["gpu.power_limit_w"]
    fig = knob_figure(summary, runs.knobs, "gpu.power_limit_w", metric)
    ax = fig.axes[0]
    (bars,) = ax.containers
    line = bars.lines[0]
    assert list(line.get_xdata()) == pytest.approx(LIMITS)
    assert list(line.get_ydata()) == pytest.approx(ys)
    assert line.get_linestyle() == "-"  # numbers: joined by a line
    assert ax.get_xscale() == "linear"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["200", "300", "400", "700"]
    assert ax.get_xlabel() == "gpu.power_limit_w (W)"
    if ylabel:
        assert ax.get_ylabel() == ylabel
