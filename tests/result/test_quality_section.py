"""result.json's quality section (schema 6): older files read with it null and the reason; the
section round-trips; a bound never stands beside a null figure."""

from __future__ import annotations

import pytest

from llem.result import Quality, RunResult
from llem.runner.summary import quality_line


def test_a_schema_5_file_reads_with_quality_null_and_why() -> None:
    old = RunResult(status="ok").to_json()
    old["schema_version"] = 5
    del old["quality"]
    read = RunResult.from_json(old)
    assert read.schema_version == 8 and read.quality is None
    assert read.null_reasons["quality"] == "not recorded before result schema 6"


def _section(**changes: object) -> Quality:
    base: dict[str, object] = dict(
        task="arithmetic",
        metric="accuracy",
        scorer="number",
        n_answers=64,
        n_correct=26,
        n_unreadable=1,
        value=26 / 64,
        ci95_low=0.293,
        ci95_high=0.531,
        interval_method="Wilson score interval, 95%",
        j_per_correct_answer=12.5,
        j_per_correct_answer_uncertainty=0.4,
        correct_answers_per_kj=80.0,
    )
    base.update(changes)
    return Quality(**base)  # type: ignore[arg-type]


def test_the_section_round_trips_through_result_json() -> None:
    result = RunResult(status="ok", quality=_section())
    assert RunResult.from_json(result.to_json()).quality == _section()


def test_a_bound_beside_a_null_figure_is_refused() -> None:
    with pytest.raises(ValueError, match="j_per_correct_answer_uncertainty"):
        _section(j_per_correct_answer=None)


def test_the_summary_line_gives_value_interval_count_and_j_per_correct_answer() -> None:
    line = quality_line(RunResult(status="ok", quality=_section()))
    assert line == (
        "quality: arithmetic accuracy 0.406 (95% 0.293-0.531, Wilson), 26/64 answers correct; "
        "J per correct answer: 12.5 ± 0.4 J"
    )
    # a window of 4 passes over 16 items says over how many items the interval runs
    line = quality_line(RunResult(status="ok", quality=_section(n_items=16)))
    assert line is not None and "26/64 answers correct over 16 items;" in line
    assert quality_line(RunResult(status="ok")) is None
