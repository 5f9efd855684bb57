"""The report on scored runs (issue 32): quality figures in results.csv and summary.csv, and the
accuracy and J per correct answer in the printed table, only where a sweep scored its answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from report import quality_synth as qs
from report import report_synth as synth

from llem.report.build import build_report
from llem.report.labels import figure_axis_label
from llem.report.load import load_runs
from llem.report.stats import summary_frame
from llem.report.table import render_table


def repeated_sweep(sweep: Path) -> Path:
    """batch_size 1,4 × 2 repeats: batch 1 scores 0.60 then 0.70 (J/correct 20 then 30, bound
    1.0 then 3.0); batch 4 scored nothing (a null quality section)."""

    def make(point: dict[str, Any]) -> dict[str, Any]:
        if point["pytorch.batch_size"] == 4:
            return qs.quality_result(None)
        r = point["repeat"]
        return qs.quality_result(
            [0.60, 0.70][r], [(0.50, 0.69), (0.60, 0.78)][r], [20.0, 30.0][r], [1.0, 3.0][r]
        )

    synth.write_sweep(sweep, {"pytorch.batch_size": [1, 4]}, make, repeats=2)
    return sweep


def test_results_csv_carries_each_runs_quality_figures(tmp_path: Path) -> None:
    sweep = repeated_sweep(tmp_path / "sweep")
    report = build_report([sweep], plots=False)
    frame = pd.read_csv(sweep / "results.csv")
    scored = frame[frame["pytorch.batch_size"] == 1].sort_values("repeat")
    assert scored["quality.value"].tolist() == [0.60, 0.70]
    assert scored["quality.ci95_low"].tolist() == [0.50, 0.60]
    assert scored["quality.j_per_correct_answer"].tolist() == [20.0, 30.0]
    assert scored["quality.j_per_correct_answer_uncertainty"].tolist() == [1.0, 3.0]
    assert scored["quality.metric"].tolist() == ["exact_match"] * 2
    unscored = frame[frame["pytorch.batch_size"] == 4]
    assert unscored["quality.value"].isna().all()
    assert (unscored["null_reasons.quality"] == "dataset.source=builtin has no references").all()
    assert (sweep / "results.parquet").is_file() and report.files


def test_summary_csv_has_the_quality_figures_statistics_over_repeats(tmp_path: Path) -> None:
    sweep = repeated_sweep(tmp_path / "sweep")
    build_report([sweep], plots=False)
    summary = pd.read_csv(sweep / "summary.csv").set_index("pytorch.batch_size")
    row = summary.loc[1]
    # by hand: mean 0.65, s = 0.0707107, t(0.975, 1) = 12.7062, half = t s / sqrt 2 = 0.635310
    assert row["quality.value.n"] == 2
    assert row["quality.value.mean"] == pytest.approx(0.65)
    assert row["quality.value.std"] == pytest.approx(0.0707107, rel=1e-5)
    assert row["quality.value.ci95_half"] == pytest.approx(0.635310, rel=1e-5)
    assert row["quality.ci95_low.mean"] == pytest.approx(0.55)
    assert row["quality.ci95_high.mean"] == pytest.approx(0.735)
    assert row["quality.j_per_correct_answer.mean"] == pytest.approx(25.0)
    assert row["quality.j_per_correct_answer.ci95_half"] == pytest.approx(63.5310, rel=1e-5)
    assert row["quality.j_per_correct_answer.bound_mean"] == pytest.approx(2.0)
    unscored = summary.loc[4]
    assert unscored["quality.value.n"] == 0 and pd.isna(unscored["quality.value.mean"])


def test_the_table_shows_accuracy_with_its_interval_and_j_per_correct_answer(
    tmp_path: Path,
) -> None:
    sweep = tmp_path / "sweep"
    qs.write_quality_sweep(sweep)
    runs = load_runs([sweep])
    text = render_table(runs, summary_frame(runs), width=140)
    header = text.splitlines()[0]
    assert "acc % (95% CI)" in header and "J/correct" in header
    lines = {tuple(line.split()[:2]): line for line in text.splitlines()[2:6]}
    assert "75.0% (63.0–84.0)" in lines[("1", "none")] and " 40.0 " in lines[("1", "none")]
    assert "62.5% (50.0–73.0)" in lines[("4", "bnb-4bit")] and " 10.0 " in lines[("4", "bnb-4bit")]
    assert "acc % = answers judged correct" in text.replace("\n", " ")


def test_a_sweep_without_quality_shows_nothing_new(realistic_sweep: Path) -> None:
    runs = load_runs([realistic_sweep])
    summary = summary_frame(runs)
    assert not [c for c in summary.columns if c.startswith("quality")]
    text = render_table(runs, summary, width=140)
    assert "acc %" not in text and "J/correct" not in text


def test_a_narrow_table_drops_the_interval_before_the_accuracy(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    qs.write_quality_sweep(sweep)
    runs = load_runs([sweep])
    text = render_table(runs, summary_frame(runs), width=80)
    assert "acc %" in text and "(95% CI)" not in text.splitlines()[0]
    assert "75.0%" in text and "(63.0–84.0)" not in text


@pytest.mark.parametrize(
    ("key", "label"),
    [
        ("quality.value", "quality.value (proportion correct, 0-1)"),
        ("quality.j_per_correct_answer", "quality.j_per_correct_answer (J/correct answer)"),
        ("quality.correct_answers_per_kj", "quality.correct_answers_per_kj (correct answers/kJ)"),
    ],
)
def test_a_searched_quality_figure_is_labelled_with_its_unit(key: str, label: str) -> None:
    assert figure_axis_label(key) == label


def test_scored_runs_without_energy_show_accuracy_and_no_energy_per_answer(tmp_path: Path) -> None:
    def cpu(point: dict[str, Any]) -> dict[str, Any]:
        result = qs.quality_result(0.25, (0.102, 0.495))
        cpu_run = synth.ok_result(energy=False)
        result.update(energy=cpu_run["energy"], validity=cpu_run["validity"])
        return result

    synth.write_sweep(tmp_path / "s", {"pytorch.batch_size": [1, 4]}, cpu)
    runs = load_runs([tmp_path / "s"])
    text = render_table(runs, summary_frame(runs), width=140)
    assert "25.0% (10.2–49.5)" in text
    assert "J/correct" not in text
