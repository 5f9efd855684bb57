from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from report import report_synth as synth

from llem.report.find import ReportError, find_run_dirs
from llem.report.load import flatten, load_runs, parse_overrides


def parse_value(raw: str) -> object:
    return parse_overrides([f"k={raw}"])["k"]


def test_override_values_are_typed_like_hydra() -> None:
    assert parse_value("4") == 4
    assert parse_value("0.7") == 0.7
    assert parse_value("1e-3") == 0.001
    assert parse_value("greedy") == "greedy"
    assert parse_value("none") == "none"
    assert parse_value("null") is None
    assert parse_value("true") is True
    assert parse_value("on") == "on"  # a string to Hydra, a bool to YAML 1.1
    assert parse_value("'1,2'") == "1,2"
    assert parse_overrides(
        [
            "+backend=pytorch",
            "++pytorch.batch_size=16",
            "~decoder.top_k",
            "hydra.verbose=true",
            "model@foo=hf",
        ]
    ) == {"backend": "pytorch", "pytorch.batch_size": 16, "model": "hf"}


def test_flatten_uses_dotted_names_and_skips_config() -> None:
    flat = flatten({"a": {"b": {"c": 1}}, "config": {"x": 1}, "w": ["x", "y"], "e": {}})
    assert flat == {"a.b.c": 1, "w": "x; y"}


def test_swept_numbers_sort_numerically(realistic_sweep: Path) -> None:
    runs = load_runs([realistic_sweep])
    assert runs.knobs == ["pytorch.batch_size", "quantization"]
    assert runs.override_keys == ["pytorch.batch_size", "quantization", "repeat"]
    frame = runs.frame
    assert str(frame["pytorch.batch_size"].dtype) == "Int64"
    assert frame["pytorch.batch_size"].tolist() == [1] * 6 + [4] * 6 + [16] * 6
    # text values keep the order the sweep ran them in (none before bnb-4bit), repeats in order
    assert frame["quantization"].tolist()[:6] == ["none"] * 3 + ["bnb-4bit"] * 3
    assert frame["repeat"].tolist()[:3] == [0, 1, 2]
    assert frame["throughput.output_tokens_per_s"].tolist()[:3] == [30.35, 31.12, 31.53]


def test_columns_follow_the_naming_scheme(realistic_sweep: Path) -> None:
    frame = load_runs([realistic_sweep]).frame
    cols = list(frame.columns)
    assert cols[:9] == [
        "run_dir",
        "status",
        "valid",
        "error.type",
        "error.message",
        "error.hint",
        "pytorch.batch_size",
        "quantization",
        "repeat",
    ]
    for name in (
        "latency.ttft_ms.p50",
        "energy.j_per_output_token",
        "energy.per_device_j.GPU-aaaa",
        "memory.peak_allocated_mb",
        "config_hash",
        "overrides",
        "workload.batch_size",
    ):
        assert name in cols
    assert not any(c.startswith("config.") for c in cols)
    # the swept group `quantization` owns the column; the result's own field moves aside
    assert "result.quantization" in cols
    assert frame["overrides"].iloc[0] == "pytorch.batch_size=1 quantization=none repeat=0"
    assert Path(frame["run_dir"].iloc[0]).is_absolute()


def test_failed_skipped_and_missing_points_stay_visible(tmp_path: Path) -> None:
    def make(p):
        return {
            1: synth.ok_result(tok_s=50.0),
            4: synth.failed_result(),
            16: synth.skipped_result(),
        }[p["pytorch.batch_size"]]

    synth.write_sweep(tmp_path / "s", {"pytorch.batch_size": [1, 4, 16]}, make)
    synth.write_run(tmp_path / "s" / "3", ["pytorch.batch_size=32"], None)  # never finished
    (tmp_path / "s" / "4").mkdir()
    (tmp_path / "s" / "4" / "result.json").write_text("{not json")
    frame = load_runs([tmp_path / "s"]).frame
    assert frame["status"].tolist() == ["ok", "failed", "skipped", "missing", "missing"]
    assert frame["pytorch.batch_size"].tolist()[:4] == [1, 4, 16, 32]
    assert frame["error.type"].tolist()[1:3] == ["OutOfMemory", "ConfigError"]
    assert "no result.json" in frame["error.message"].iloc[3]
    assert "unreadable" in frame["error.message"].iloc[4]
    assert frame["throughput.output_tokens_per_s"].isna().tolist() == [
        False,
        True,
        True,
        True,
        True,
    ]


def test_missing_point_joins_its_configuration(tmp_path: Path) -> None:
    synth.write_sweep(
        tmp_path / "s",
        {"pytorch.batch_size": [2]},
        lambda p: None if p["repeat"] == 1 else synth.ok_result(),
        repeats=3,
    )
    frame = load_runs([tmp_path / "s"]).frame
    assert frame["status"].tolist() == ["ok", "missing", "ok"]
    assert frame["config_hash"].nunique() == 1


def test_single_run_and_constant_overrides_are_not_knobs(tmp_path: Path, single_run: Path) -> None:
    runs = load_runs([single_run])
    assert runs.n_runs == 1 and runs.knobs == []
    synth.write_sweep(
        tmp_path / "s",
        {"decoder.max_new_tokens": [8], "decoder": ["greedy", "creative"]},
        lambda p: synth.ok_result(),
    )
    runs = load_runs([tmp_path / "s"])
    assert runs.knobs == ["decoder"]
    assert "decoder.max_new_tokens" in runs.frame.columns


def test_merging_sweeps_fills_knobs_from_choices_and_config(tmp_path: Path) -> None:
    synth.write_sweep(tmp_path / "a", {"pytorch.batch_size": [1, 4]}, lambda p: synth.ok_result())
    synth.write_sweep(
        tmp_path / "b",
        {"decoder": ["creative"], "pytorch.batch_size": [16]},
        lambda p: synth.ok_result(),
    )
    runs = load_runs([tmp_path / "a", tmp_path / "b"])
    assert runs.n_runs == 3
    assert runs.knobs == ["pytorch.batch_size", "decoder"]
    # sweep a did not override decoder: its rows get the group choice it ran with
    assert runs.frame["decoder"].tolist() == ["greedy", "greedy", "creative"]
    assert runs.frame["pytorch.batch_size"].tolist() == [1, 4, 16]


def test_older_partial_results_are_tolerated(tmp_path: Path) -> None:
    run = tmp_path / "old"
    run.mkdir()
    (run / "result.json").write_text(
        json.dumps(
            {"throughput": {"output_tokens_per_s": 9.5}, "overrides": ["pytorch.batch_size=2"]}
        )
    )
    runs = load_runs([run])
    row = runs.frame.iloc[0]
    assert row["status"] == "ok"
    assert row["pytorch.batch_size"] == 2
    # a schema-1 rate was over the time inside generate(): migrated to its own name, and with no
    # window to recompute it over, the window rate is absent (never the old figure relabelled)
    assert row["throughput.generate_output_tokens_per_s"] == 9.5
    assert pd.isna(row["throughput.output_tokens_per_s"])
    assert pd.isna(row["valid"])  # not judged
    assert row["config_hash"].startswith("ovr-")


def test_no_runs_is_a_report_error(tmp_path: Path) -> None:
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    with pytest.raises(ReportError, match="no runs found"):
        load_runs([tmp_path / "empty"])
    with pytest.raises(ReportError, match="does not exist"):
        load_runs([tmp_path / "nope"])
    assert find_run_dirs(tmp_path / "empty") == []


def test_run_dirs_are_found_in_natural_order(tmp_path: Path) -> None:
    for n in (10, 2, 1):
        synth.write_run(tmp_path / "s" / str(n), [f"pytorch.batch_size={n}"], synth.ok_result())
    (tmp_path / "s" / "plots").mkdir()
    assert [p.name for p in find_run_dirs(tmp_path / "s")] == ["1", "2", "10"]


def test_a_sweep_root_is_never_taken_for_a_run(realistic_sweep: Path) -> None:
    (realistic_sweep / ".hydra").mkdir()  # a sweeper may keep its own record here
    runs = load_runs([realistic_sweep])
    assert runs.n_runs == 18
    cols = list(runs.frame.columns)
    assert cols[9:11] == ["config_hash", "overrides"]


def test_valid_column_holds_the_energy_verdict(tmp_path: Path) -> None:
    verdicts = {1: True, 2: False, 4: None}
    synth.write_sweep(
        tmp_path / "s",
        {"pytorch.batch_size": [1, 2, 4, 8]},
        lambda p: (
            synth.failed_result()
            if p["pytorch.batch_size"] == 8
            else synth.ok_result(
                energy=verdicts[p["pytorch.batch_size"]] is not None,
                valid=verdicts[p["pytorch.batch_size"]],
            )
        ),
    )
    frame = load_runs([tmp_path / "s"]).frame
    assert str(frame["valid"].dtype) == "boolean"
    # true, false, and empty where it was not judged (CPU run; a failed run)
    assert frame["valid"].astype(object).tolist() == [True, False, pd.NA, pd.NA]
    assert frame["validity.energy_valid"].astype(object).tolist()[:2] == [True, False]


def test_what_the_hardware_key_needs_comes_from_the_result_and_environment_json(
    tmp_path: Path,
) -> None:
    def make(p):
        result = synth.ok_result()
        result["hardware"]["gpus"][0]["power_limit_w"] = 300.0
        return result

    dirs = synth.write_sweep(tmp_path / "s", {"pytorch.batch_size": [1, 2]}, make)
    env = {"cpu": {"model": "AMD EPYC 7763"}, "driver_version": "550.54", "pip_freeze": []}
    (dirs[0] / "environment.json").write_text(json.dumps(env))
    frame = load_runs([tmp_path / "s"]).frame
    assert frame["environment.cpu.model"].tolist()[0] == "AMD EPYC 7763"
    assert frame["environment.driver_version"].tolist()[0] == "550.54"
    assert pd.isna(frame["environment.driver_version"].tolist()[1])  # no environment.json
    assert frame["hardware.gpus.power_limit_w"].tolist() == ["300", "300"]


# --------------------------------------------------------------------------- run-order settings


def _two_orders(tmp_path: Path) -> list[Path]:
    """The same grid run twice, once in each order: only ``sweep.order`` differs."""
    dirs = []
    for order, tok in (("grouped", 100.0), ("shuffle", 104.0)):
        dirs.append(tmp_path / order)
        synth.write_sweep(
            dirs[-1],
            {"pytorch.batch_size": [1, 4], "sweep.order": [order]},
            lambda p, tok=tok: synth.ok_result(tok_s=tok * p["pytorch.batch_size"]),
        )
    return dirs


@pytest.mark.slow
def test_the_run_order_is_no_knob_and_runs_that_differ_in_it_are_pooled(tmp_path: Path) -> None:
    from llem.report.build import build_report

    report = build_report(_two_orders(tmp_path), out=tmp_path / "merged")
    assert report.runs.knobs == ["pytorch.batch_size"]
    assert report.runs.settings == ["sweep.order"]
    # results.csv keeps each run's order; the summary pools both orders of a configuration
    assert sorted(report.runs.frame["sweep.order"]) == ["grouped", "grouped", "shuffle", "shuffle"]
    assert "sweep.order" not in report.summary.columns
    assert report.summary["n"].tolist() == [2, 2]
    assert report.summary["throughput.output_tokens_per_s.mean"].tolist() == [102.0, 408.0]
    header = report.text.splitlines()[2]
    assert header.split()[:2] == ["batch_size", "tok/s"] and "order" not in header
    assert "grouped" not in report.text.split("\n\n")[1]  # the table names no order
    assert "sweep.order differs between the runs (grouped ×2, shuffle ×2)" in report.text
    plots = sorted(p.name for p in (tmp_path / "merged" / "plots").iterdir())
    assert plots == [
        "j_per_token_vs_pytorch.batch_size.png",
        "pareto.png",
        "tokens_per_s_vs_pytorch.batch_size.png",
    ]


# --------------------------------------------------------------------------- a sweep's plan


def _write_plan(sweep: Path, grid: list[list[str]]) -> None:
    from llem.config.schema import SweepOrder
    from llem.sweep.plan import Plan, Point
    from llem.sweep.plan_file import write_plan

    points = [Point(index=i, overrides=o) for i, o in enumerate(grid)]
    plan = Plan(points, SweepOrder.grouped, 0, [p.index for p in points])
    write_plan(sweep, plan, reuse=True, batch_size=1)


def test_a_sweep_reports_the_points_of_its_plan_and_names_the_others_apart(
    tmp_path: Path,
) -> None:
    """A re-run with a smaller grid: the old grid's #3-#5 (one failed) stay in the directory."""
    from llem.report.build import build_report

    sweep = tmp_path / "sweep"
    synth.write_sweep(
        sweep,
        {"pytorch.batch_size": [1, 2, 3, 4, 5, 6]},
        lambda p: synth.failed_result() if p["pytorch.batch_size"] == 4 else synth.ok_result(),
    )
    _write_plan(sweep, [[f"pytorch.batch_size={b}"] for b in (1, 2, 3)])
    report = build_report([sweep], plots=False)
    assert report.runs.frame["pytorch.batch_size"].tolist() == [1, 2, 3]
    assert [p.name for p in report.runs.outside_plan] == ["3", "4", "5"]
    table = report.text.split("\n\n")[1].splitlines()
    assert [line.split()[0] for line in table[2:5]] == ["1", "2", "3"]
    assert "failed" not in report.text.split("\n\n")[0]  # the heading counts 3 ok runs
    assert (
        "not in this sweep's plan (an older grid's points, left out of this report): 3, 4, 5"
        in report.text
    )
    # a directory above several sweeps: each sweep by its own plan
    assert load_runs([tmp_path]).outside_plan == report.runs.outside_plan


def test_without_a_plan_every_point_directory_is_reported(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    synth.write_sweep(sweep, {"pytorch.batch_size": [1, 2, 3]}, lambda p: synth.ok_result())
    runs = load_runs([sweep])
    assert runs.n_runs == 3 and runs.outside_plan == []
