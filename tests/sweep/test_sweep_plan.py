"""Planning without Hydra: ordering, model-load counting, resume marking, labels, summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra.core.utils import JobReturn, JobStatus

from llem.config.schema import SweepOrder
from llem.hydra.overrides import swept_keys
from llem.result import RunResult, SweepPosition
from llem.sweep.collect import collect
from llem.sweep.launch import batch_size, in_process, job_overrides
from llem.sweep.outcomes import JobOutcome
from llem.sweep.plan import Plan, Point, short_label
from llem.sweep.point_dirs import mark_done, settle_directories
from llem.sweep.progress import MAX_LISTED, SweepProgress, summary_lines
from llem.sweep.run_order import order_points


def points(keys: list[str], repeats: list[int] | None = None) -> list[Point]:
    repeats = repeats or [0] * len(keys)
    return [
        Point(index=i, overrides=[f"x={i}"], load_key=k, repeat=r, config_hash=f"h{k}")
        for i, (k, r) in enumerate(zip(keys, repeats, strict=True))
    ]


# Hydra's grid order for `model.dtype=a,b decoder=g,c repeat=0,1`: repeat varies fastest.
GRID_KEYS = ["a", "a", "a", "a", "b", "b", "b", "b"]
GRID_REPEATS = [0, 1, 0, 1, 0, 1, 0, 1]


def test_grouped_runs_points_with_the_same_load_key_back_to_back() -> None:
    pts = points(["a", "b", "a", "b", "c", "a"])
    assert order_points(pts, SweepOrder.grouped, 0) == [0, 2, 5, 1, 3, 4]


def test_interleave_runs_every_configuration_once_before_any_repeats() -> None:
    pts = points(GRID_KEYS, GRID_REPEATS)
    run = order_points(pts, SweepOrder.interleave, 0)
    assert run == [0, 2, 4, 6, 1, 3, 5, 7]
    repeats = [pts[i].repeat for i in run]
    assert repeats == sorted(repeats)  # round 0 entirely before round 1
    # grouped order would put both repeats of a configuration next to each other
    assert order_points(pts, SweepOrder.grouped, 0) == list(range(8))


def test_shuffle_is_a_seeded_permutation() -> None:
    pts = points(GRID_KEYS, GRID_REPEATS)
    first = order_points(pts, SweepOrder.shuffle, 7)
    assert first == order_points(pts, SweepOrder.shuffle, 7)
    assert sorted(first) == list(range(8))
    orders = {tuple(order_points(pts, SweepOrder.shuffle, seed)) for seed in range(6)}
    assert len(orders) > 1  # the seed matters


def test_only_pending_points_are_ordered() -> None:
    pts = points(["a", "a", "b", "b"])
    pts[1].status = "done"
    pts[2].status = "skipped"
    for order in SweepOrder:
        assert sorted(order_points(pts, order, 0)) == [0, 3]


def test_model_loads_counts_consecutive_equal_load_keys_once() -> None:
    pts = points(GRID_KEYS, GRID_REPEATS)
    grouped = Plan(pts, SweepOrder.grouped, 0, order_points(pts, SweepOrder.grouped, 0))
    interleaved = Plan(pts, SweepOrder.interleave, 0, order_points(pts, SweepOrder.interleave, 0))
    assert grouped.model_loads(reuse=True) == 2
    assert interleaved.model_loads(reuse=True) == 4  # a, b, a, b
    assert grouped.model_loads(reuse=False) == 8
    assert grouped.position(0) == 1 and interleaved.position(1) == 5


def test_mark_done_needs_an_ok_result_with_the_same_config_hash(tmp_path: Path) -> None:
    pts = points(["a", "a", "a", "a"])
    RunResult(status="ok", config_hash="ha").write(tmp_path / "0")
    RunResult(status="failed", config_hash="ha").write(tmp_path / "1")
    RunResult(status="ok", config_hash="something-else").write(tmp_path / "2")
    mark_done(pts, tmp_path)  # 3 has no result at all
    assert [p.status for p in pts] == ["done", "pending", "pending", "pending"]


def test_labels_show_only_the_swept_overrides() -> None:
    jobs = [
        ["model=hf", "decoder=greedy", "pytorch.batch_size=1"],
        ["model=hf", "decoder=greedy", "pytorch.batch_size=2"],
        ["model=hf", "decoder=creative", "pytorch.batch_size=1", "+decoder.top_k=5"],
    ]
    keys = swept_keys(jobs)
    assert keys == ["decoder", "pytorch.batch_size", "decoder.top_k"]
    assert short_label(jobs[0], keys) == "decoder=greedy pytorch.batch_size=1"
    assert short_label(["a=1"], []) == "a=1"


def test_summary_fits_one_screen() -> None:
    outcomes = [
        JobOutcome(index=i, status="failed", label=f"p={i}", error=f"boom {i}") for i in range(25)
    ] + [JobOutcome(index=99, status="ok", label="p=99")]
    lines = summary_lines(outcomes, 75.0)
    assert lines[0] == "sweep finished in 1m15s: 1 ok · 25 failed · 0 skipped"
    assert lines[1] == "  failed #0 [p=0]: boom 0"
    assert len(lines) == 1 + MAX_LISTED + 1
    assert "15 more failed" in lines[-1]


def test_the_summary_says_an_error_that_several_points_share_once() -> None:
    oom = "OutOfMemory: CUDA out of memory"
    outcomes = [
        JobOutcome(index=0, status="failed", label="b=64", error=oom),
        JobOutcome(index=1, status="ok", label="b=1"),
        JobOutcome(index=2, status="failed", label="b=128", error=oom),
        JobOutcome(index=3, status="failed", label="b=9", error="RunError: boom"),
    ]
    assert summary_lines(outcomes, 5.0)[1:] == [
        f"  failed #0 [b=64], #2 [b=128]: {oom}",
        "  failed #3 [b=9]: RunError: boom",
    ]


def test_progress_estimates_time_left_from_finished_points() -> None:
    now = [0.0]
    progress = SweepProgress(4, clock=lambda: now[0])
    assert "ETA" not in progress.starting(1, 0, "a=1")
    now[0] = 10.0
    progress.done(0, "a=1", "ok")
    line = progress.starting(2, 1, "a=2")
    assert line == "point 2/4 (#1) [a=2] · elapsed 10s · ETA 30s"


def test_jobs_for_other_processes_turn_model_reuse_off_and_keep_the_grid_index() -> None:
    p = Point(index=7, overrides=["decoder=greedy", "sweep.reuse_model=true"])
    assert job_overrides(p, force_no_reuse=True) == [
        "decoder=greedy",
        "sweep.reuse_model=false",
        "hydra.sweep.subdir=7",
    ]
    assert job_overrides(p, force_no_reuse=False)[-1] == "hydra.sweep.subdir=7"


def test_batch_size_is_one_on_this_machine_and_everything_on_a_cluster() -> None:
    from hydra_plugins.hydra_joblib_launcher.joblib_launcher import JoblibLauncher
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import LocalLauncher, SlurmLauncher

    assert batch_size(object(), None, 12, local=True) == 1  # in-process
    assert batch_size(object(), 4, 12, local=True) == 1
    for launcher in (JoblibLauncher(), LocalLauncher()):
        assert batch_size(launcher, None, 12, local=False) == 1
    assert batch_size(SlurmLauncher(), None, 12, local=False) == 12
    assert batch_size(SlurmLauncher(), 4, 12, local=False) == 4


def test_only_hydras_default_launcher_runs_points_in_process() -> None:
    from omegaconf import OmegaConf

    def config(launcher: str) -> object:
        return OmegaConf.create({"hydra": {"runtime": {"choices": {"hydra/launcher": launcher}}}})

    assert in_process(config("basic"))  # type: ignore[arg-type]
    for other in ("joblib", "submitit_local", "slurm_gpu"):
        assert not in_process(config(other))  # type: ignore[arg-type]


@pytest.mark.parametrize("launcher_failed", [False, True])
def test_a_job_that_left_no_result_gets_a_failed_one(tmp_path: Path, launcher_failed) -> None:
    """A job whose process died (or a launcher that failed) still leaves a failed result.json."""
    point = Point(index=3, overrides=["decoder=greedy"], config_hash="abc")
    if launcher_failed:
        ret, launch_error = None, RuntimeError('Could not detect "srun"')
    else:
        ret = JobReturn(status=JobStatus.FAILED, _return_value=MemoryError("killed"))
        launch_error = None
    status, error = collect(point, ret, launch_error, tmp_path / "3", before=None)
    assert status == "failed"
    written = json.loads((tmp_path / "3" / "result.json").read_text())
    assert written["status"] == "failed" and written["config_hash"] == "abc"
    expected = "RuntimeError" if launcher_failed else "MemoryError"
    assert written["error"]["type"] == expected and error.startswith(expected)
    assert written["error"]["hint"]
    assert (tmp_path / "3" / ".hydra" / "overrides.yaml").read_text() == '- "decoder=greedy"\n'


def test_a_job_return_from_another_process_is_trusted(tmp_path: Path) -> None:
    point = Point(index=0, overrides=[])
    ret = JobReturn(status=JobStatus.COMPLETED, _return_value=JobOutcome(status="ok"))
    assert collect(point, ret, None, tmp_path / "0", None) == ("ok", None)
    assert not (tmp_path / "0").exists()


def test_a_result_moved_to_its_new_index_says_its_new_index(tmp_path: Path) -> None:
    """A grid value added in front shifts a finished point from #0 to #1: its result moves and
    its ``sweep`` section says #1 (found in #0), with the run order it ran in kept."""
    ran = SweepPosition(grid_index=0, position=1, of=1, order="grouped", seed=7)
    RunResult(status="ok", config_hash="hb", sweep=ran).write(tmp_path / "0")
    pts = points(["a", "b"])
    mark_done(pts, tmp_path)
    assert pts[1].found_at == 0
    lines = settle_directories(pts, tmp_path)
    assert "#1: its finished result was in #0; moved to #1 (not re-run)" in lines
    moved = RunResult.read(tmp_path / "1")
    assert moved is not None and moved.sweep is not None
    assert moved.sweep.grid_index == 1 and moved.sweep.moved_from == 0
    assert (moved.sweep.position, moved.sweep.of, moved.sweep.seed) == (1, 1, 7)
    on_disk = json.loads((tmp_path / "1" / "result.json").read_text())
    assert on_disk["sweep"]["grid_index"] == 1
    assert not (tmp_path / "0").exists() and not (tmp_path / ".relocating").exists()
