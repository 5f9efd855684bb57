"""result.json's one owner: typed sections, round trips, migration from schema 1, strict reading."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from llem.result import (
    SCHEMA_VERSION,
    Energy,
    ErrorInfo,
    Figure,
    Percentiles,
    ResultFormatError,
    RunResult,
    SweepPosition,
    write_unmeasured,
)
from llem.result.figure import figure_specs

DATA = Path(__file__).resolve().parents[1] / "data"


def test_a_result_survives_a_round_trip_through_its_file(tmp_path: Path) -> None:
    r = RunResult(status="ok", config_hash="abc", overrides=["pytorch.batch_size=4"])
    r.latency.ttft_ms = Percentiles(12.0, 20.0, 31.5)
    r.set_figures("energy", {"per_device_j": {"GPU-1": Figure(10.5, 0.2)}})
    r.set_figure("energy.total_j", Figure(10.5, bound=None, bound_null_reason="no bound here"))
    r.sweep = SweepPosition(grid_index=3, position=1, of=4, order="grouped", seed=0)
    r.write(tmp_path)
    back = RunResult.read(tmp_path)
    assert back == r
    assert back.figure("energy.total_j") == Figure(10.5, None, None, "no bound here")
    assert json.loads((tmp_path / "result.json").read_text())["schema_version"] == SCHEMA_VERSION


def test_a_schema_1_file_from_llem_0_1_0_still_loads(tmp_path: Path) -> None:
    """A real result.json written by llem 0.1.0 (a sweep point on the tiny model)."""
    shutil.copy(DATA / "result_v1_sweep_point.json", tmp_path / "result.json")
    r = RunResult.read(tmp_path)
    assert r is not None
    assert r.schema_version == SCHEMA_VERSION
    assert r.status == "ok" and r.backend == "pytorch"
    # v1's rate was over generate() time; v2's is over the window energy is measured over.
    assert r.throughput.generate_output_tokens_per_s == 21.453
    assert r.throughput.output_tokens_per_s == round(32 / 1.5261944569999741, 3)
    assert r.latency.itl_per_token_ms.p99 == 479.3105  # schema 5: the spread ITL
    assert r.latency.itl_ms.p99 is None
    assert r.sweep == SweepPosition(grid_index=1, position=2, of=2, order="grouped", seed=0)
    assert r.lifecycle.load_kwargs["trust_remote_code"] is False
    assert r.validity.energy_valid is None  # new in schema 2: absent means not judged
    assert r.null_reasons["energy.total_j"].startswith("the run is on device=cpu")
    assert RunResult.from_json(r.to_json()) == r


def test_unknown_keys_and_newer_schemas_are_refused_by_name() -> None:
    data = RunResult(status="ok").to_json()
    data["energy"]["joules_total"] = 3.0
    with pytest.raises(ResultFormatError, match=r"energy\.joules_total"):
        RunResult.from_json(data)
    newer = RunResult(status="ok").to_json()
    newer["schema_version"] = SCHEMA_VERSION + 1
    with pytest.raises(ResultFormatError, match="upgrade llem"):
        RunResult.from_json(newer)
    assert RunResult.read(Path("/nonexistent")) is None


def test_a_record_for_a_point_that_never_measured_has_every_section(tmp_path: Path) -> None:
    write_unmeasured(
        tmp_path,
        status="skipped",
        error=ErrorInfo("ConfigError", "bad combination", None),
        config_hash=None,
        overrides=["a=1"],
    )
    written = json.loads((tmp_path / "result.json").read_text())
    assert written["status"] == "skipped" and written["error"]["message"] == "bad combination"
    for section in ("workload", "latency", "energy", "memory", "thermal", "compute", "validity"):
        assert isinstance(written[section], dict)
    assert written["energy"]["total_j"] is None and written["sweep"] is None


def test_a_figure_its_bound_and_its_null_reason_are_set_together() -> None:
    r = RunResult(status="ok")
    r.set_figure("energy.j_per_output_token", Figure.null("no output tokens"))
    assert r.energy.j_per_output_token is None and r.energy.j_per_output_token_uncertainty is None
    assert r.null_reasons["energy.j_per_output_token"] == "no output tokens"
    assert r.null_reasons["energy.j_per_output_token_uncertainty"] == "no output tokens"
    r.set_figure("energy.j_per_output_token", Figure(0.25, 0.01))
    assert (r.energy.j_per_output_token, r.energy.j_per_output_token_uncertainty) == (0.25, 0.01)
    assert not [k for k in r.null_reasons if k.startswith("energy.j_per_output_token")]
    assert r.figure("energy.j_per_output_token") == Figure(0.25, 0.01)
    r.set_figure("thermal.max_temp_c", Figure.null("no temperature readings"))
    assert r.figure("thermal.max_temp_c").null_reason == "no temperature readings"
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.energy.total_j = 3.0  # type: ignore[misc]
    with pytest.raises(ValueError, match="not figures of Energy"):
        r.set_figure("energy.source", Figure("nvml_counter"))


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: Figure(None), "needs the reason"),
        (lambda: Figure(None, 0.1, "gone"), "no bound"),
        (lambda: Figure(1.0, null_reason="why"), "no null reason"),
        (lambda: Figure(1.0, 0.1, bound_null_reason="why"), "has a bound"),
        (lambda: Energy(total_j_uncertainty=0.5), "total_j is null"),
        (lambda: Energy(per_device_j={"a": None}, per_device_j_uncertainty={"a": 1.0}), "null"),
    ],
)
def test_a_figure_cannot_disagree_with_itself(make, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


def test_a_file_with_a_bound_for_a_null_figure_is_refused() -> None:
    data = RunResult(status="ok").to_json()
    data["energy"]["avg_power_w_uncertainty"] = 1.0
    with pytest.raises(ResultFormatError, match="avg_power_w is null"):
        RunResult.from_json(data)


def test_every_bounded_energy_figure_has_its_bound_field_in_the_schema() -> None:
    written = RunResult(status="ok").to_json()["energy"]
    specs = figure_specs(Energy)
    bounded = [s.name for s in specs.values() if s.bound]
    assert "total_j" in bounded and "peak_power_w" not in bounded
    assert all(f"{name}_uncertainty" in written for name in bounded)
    assert list(written) == [f.name for f in dataclasses.fields(Energy)]


def test_a_schema_2_file_loads_with_its_serving_sections_null_and_explained(
    tmp_path: Path,
) -> None:
    """A real result.json written by llem before schema 3 (a tiny-model run, static batches)."""
    shutil.copy(DATA / "result_v2_tiny_run.json", tmp_path / "result.json")
    r = RunResult.read(tmp_path)
    assert r is not None and r.schema_version == SCHEMA_VERSION == 8
    assert r.workload.requests == 3 and r.latency.ttft_ms.p50 == 1074.4352
    # every request of a schema-2 run was timed from its generate() call's start
    assert r.latency.ttft_origin == "batch start"  # batches of 2 of its 3 prompts
    assert r.latency.tpot_ms == Percentiles() and r.latency.e2e_ms == Percentiles()
    for section in ("traffic", "concurrency", "steady_state", "goodput"):
        assert getattr(r, section) is None
        assert r.null_reasons[section] == "not recorded before result schema 3"
    assert RunResult.from_json(r.to_json()) == r


def test_the_serving_sections_survive_a_round_trip(tmp_path: Path) -> None:
    from llem.result import Concurrency, Goodput, Lateness, SteadyState, Traffic
    from llem.result.figure import with_figures

    r = RunResult(status="ok")
    r.latency.ttft_origin = "actual send"
    r.latency.ttft_from_schedule_ms = Percentiles(1.0, 2.0, 3.0)
    r.latency.tpot_ms = Percentiles(10.0, 12.0, 15.0)
    r.traffic = Traffic("poisson", 8.0, None, 100, None, 0, Lateness(0.1, 0.9, 1.5))
    r.concurrency = Concurrency("vllm.max_num_seqs", 64, 30.5, 64, 40.0)
    steady, reasons = with_figures(
        SteadyState("open_loop", 1.0, 21.0, 20.0, 150, 3000, 150.0, 40.0),
        "steady_state",
        {"energy_j": Figure(4000.0, 20.0), "avg_power_w": Figure.null("no energy source")},
    )
    r.steady_state = steady
    r.null_reasons.update(reasons)
    r.goodput = Goodput(None, 50.0, None, 90, 0.9, 3.0, 60.0)
    r.write(tmp_path)
    back = RunResult.read(tmp_path)
    assert back == r
    assert back.figure("steady_state.energy_j") == Figure(4000.0, 20.0)
    assert back.figure("steady_state.avg_power_w") == Figure.null("no energy source")
