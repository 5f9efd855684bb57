"""result.json schema 8: the attribution's figures carry a 95 % interval, the boundary's its
bounds; a schema 7 file, which computed neither, migrates with each missing companion of a figure
that has a value null with the reason, and none invented for a figure that is null."""

from __future__ import annotations

from llem.result import RunResult
from llem.result.migrate import SCHEMA_VERSION


def _schema_7() -> dict:
    old = RunResult(status="ok").to_json()
    old["schema_version"] = 7
    old["energy"] = {**(old.get("energy") or {}), "prefill_j": 12.0, "decode_j": None}
    old["boundary"] = {"boundary": "gpu", "gpu_j": 40.0, "total_j": 40.0}
    old["null_reasons"] = {"energy.decode_j": "no decode steps"}
    for key in ("energy.prefill_j_ci95_half_width", "boundary.gpu_j_uncertainty"):
        old["null_reasons"].pop(key, None)
    return old


def test_a_schema_7_file_reads_as_schema_8_with_its_missing_intervals_explained() -> None:
    read = RunResult.from_json(_schema_7())
    assert SCHEMA_VERSION == 8 and read.schema_version == 8
    why = read.null_reasons
    assert why["energy.prefill_j_ci95_half_width"] == "not computed before result schema 8"
    assert why["boundary.gpu_j_uncertainty"] == "not computed before result schema 8"
    assert why["boundary.total_j_uncertainty"] == "not computed before result schema 8"
    # a null figure keeps its own reason and gets no companion's
    assert why["energy.decode_j"] == "no decode steps"
    assert "energy.decode_j_ci95_half_width" not in why
    assert "boundary.dram_j_uncertainty" not in why
    assert read.energy is not None and read.energy.prefill_j == 12.0
    assert read.energy.prefill_j_ci95_half_width is None


def test_a_schema_8_file_keeps_its_intervals() -> None:
    data = _schema_7()
    data["schema_version"] = 8
    data["energy"]["prefill_j_ci95_half_width"] = 1.5
    read = RunResult.from_json(data)
    assert read.energy is not None and read.energy.prefill_j_ci95_half_width == 1.5
    assert "energy.prefill_j_ci95_half_width" not in read.null_reasons


def test_a_schema_7_quality_keeps_its_count_as_n_answers_and_says_it_had_no_items() -> None:
    data = _schema_7()
    data["quality"] = {
        "task": "arithmetic",
        "metric": "exact_match",
        "scorer": "number",
        "n_scored": 160,
        "n_correct": 96,
        "n_unreadable": 0,
        "value": 0.6,
        "interval_method": "Wilson score interval, 95%",
    }
    read = RunResult.from_json(data)
    assert read.quality is not None and read.quality.n_answers == 160
    assert read.quality.n_items is None
    assert "over the answers" in read.null_reasons["quality.n_items"]
