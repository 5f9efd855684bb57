"""Sweeps through ``main()`` in this process: dry runs, order, repeats, model reuse, errors.

Model reuse only exists in-process (Hydra's default launcher), so running here is the real thing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from llem.app.entrypoint import main
from llem.config.schema import SweepOrder
from llem.sweep.plan import Point
from llem.sweep.run_order import order_points

from .conftest import FAST, NO_REPORT, plan, result


@pytest.fixture(autouse=True)
def _keep_argv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", list(sys.argv))  # main() rewrites sys.argv


@pytest.fixture()
def no_model_loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Any attempt to load a model fails the test (and is recorded)."""
    import transformers

    from llem.backends.pytorch import PyTorchBackend

    attempts: list[str] = []

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        attempts.append(repr(args)[:80])
        raise AssertionError("a dry run loaded a model")

    monkeypatch.setattr(PyTorchBackend, "load", forbidden)
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", forbidden)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", forbidden)
    return attempts


def sweep(tiny: list[str], sweep_dir: Path, *args: str) -> int:
    return main(["--multirun", *tiny, *FAST, NO_REPORT, f"hydra.sweep.dir={sweep_dir}", *args])


# --------------------------------------------------------------------------- dry run
def test_dry_run_prints_the_plan_and_loads_nothing(
    tiny: list[str], tmp_path: Path, capsys: pytest.CaptureFixture, no_model_loads: list[str]
) -> None:
    sweep_dir = tmp_path / "sweep"
    code = sweep(
        tiny,
        sweep_dir,
        "dry_run=true",
        "decoder.max_new_tokens=4",
        "decoder.min_new_tokens=1,8",
        "model.dtype=float32,bfloat16",
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert no_model_loads == []
    assert not sweep_dir.exists()  # a dry run writes nothing
    assert "4 points · 2 skipped · 0 already done · 2 to run" in out
    assert "2 model load(s)" in out
    skipped = [line for line in out.splitlines() if line.strip().startswith("skipped #")]
    assert len(skipped) == 2
    assert all("min_new_tokens" in line and "max_new_tokens" in line for line in skipped)
    assert out.count("pre-flight ok") == 2
    assert "nothing was loaded" in out


def test_dry_run_with_a_point_that_fails_pre_flight_exits_3(
    tiny: list[str], tmp_path: Path, capsys: pytest.CaptureFixture, no_model_loads: list[str]
) -> None:
    missing = tmp_path / "no-such-model"
    code = sweep(
        [tiny[0], f"model.name_or_path={tiny[1].split('=', 1)[1]},{missing}"],
        tmp_path / "sweep",
        "dry_run=true",
    )
    out = capsys.readouterr().out
    assert code == 3, out
    assert no_model_loads == []
    failed = [line for line in out.splitlines() if "pre-flight FAILED" in line]
    assert len(failed) == 1 and str(missing) in failed[0]


@pytest.mark.slow
def test_dry_run_of_the_quantization_grid_skips_none_with_a_4bit_quant_type(
    tiny: list[str], tmp_path: Path, capsys: pytest.CaptureFixture, no_model_loads: list[str]
) -> None:
    code = sweep(
        tiny,
        tmp_path / "sweep",
        "dry_run=true",
        "quantization=none,bnb-4bit",
        "quantization.bnb_4bit_quant_type=nf4,fp4",
    )
    out = capsys.readouterr().out
    skipped = [line for line in out.splitlines() if line.strip().startswith("skipped #")]
    assert [s.split("[")[1].split("]")[0] for s in skipped] == [
        "quantization=none quantization.bnb_4bit_quant_type=nf4",
        "quantization=none quantization.bnb_4bit_quant_type=fp4",
    ]
    assert all("load_in_4bit" in s for s in skipped)
    # the bnb-4bit points need bitsandbytes (and, on CPU, a GPU) to pass pre-flight
    has_bnb = importlib.util.find_spec("bitsandbytes") is not None
    assert code == (0 if has_bnb else 3), out
    assert no_model_loads == []


# --------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "grid,words",
    [
        ("decoder.bogus=1,2", ["decoder.bogus"]),
        ("pytorch.batch_size=1,abc", ["pytorch.batch_size", "abc"]),
        ("decoder=greedy,nope", ["decoder=nope", "creative"]),
    ],
)
@pytest.mark.slow
def test_a_bad_key_or_value_in_a_grid_stops_everything_with_exit_2(
    tiny: list[str], tmp_path: Path, capsys: pytest.CaptureFixture, grid: str, words: list[str]
) -> None:
    code = sweep(tiny, tmp_path / "sweep", grid)
    err = capsys.readouterr().err
    assert code == 2, err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err
    assert all(w in errors[0] for w in words), errors[0]
    assert "Traceback" not in err
    assert not (tmp_path / "sweep").exists()  # nothing ran


# --------------------------------------------------------------------------- order, repeats
def expected_order(order: SweepOrder, seed: int, keys: list[str], repeats: list[int]) -> list[int]:
    pts = [
        Point(index=i, overrides=[], load_key=k, repeat=r)
        for i, (k, r) in enumerate(zip(keys, repeats, strict=True))
    ]
    return order_points(pts, order, seed)


@pytest.mark.parametrize("order", [o.value for o in SweepOrder])
@pytest.mark.slow
def test_each_order_is_followed_and_recorded(tiny: list[str], tmp_path: Path, order: str) -> None:
    sweep_dir = tmp_path / "sweep"
    code = sweep(
        tiny,
        sweep_dir,
        "model.dtype=float32,bfloat16",
        "repeat=range(2)",
        f"sweep.order={order}",
        "sweep.seed=3",
    )
    assert code == 0
    recorded = plan(sweep_dir)
    # Hydra's grid order: model.dtype slowest, repeat fastest
    keys, repeats = ["f32", "f32", "bf16", "bf16"], [0, 1, 0, 1]
    assert recorded["order"] == order and recorded["seed"] == 3
    assert recorded["run_order"] == expected_order(SweepOrder(order), 3, keys, repeats)
    results = [result(sweep_dir, i) for i in range(4)]
    assert all(r["status"] == "ok" for r in results)
    # each result knows its place in the run order
    by_position = sorted(range(4), key=lambda i: results[i]["sweep"]["position"])
    assert by_position == recorded["run_order"]
    assert {r["sweep"]["order"] for r in results} == {order}
    # repeats are the same configuration: same hash, repeat excluded
    assert results[0]["config_hash"] == results[1]["config_hash"]
    assert results[2]["config_hash"] == results[3]["config_hash"]
    assert results[0]["config_hash"] != results[2]["config_hash"]
    # model reuse follows the order: only a point right after one with the same dtype reuses it
    previous = None
    for i in recorded["run_order"]:
        dtype = keys[i]
        assert results[i]["lifecycle"]["model_reused"] is (dtype == previous), (order, i)
        previous = dtype


# --------------------------------------------------------------------------- model reuse
def lifecycle(sweep_dir: Path, n: int) -> dict[int, dict[str, Any]]:
    return {i: result(sweep_dir, i)["lifecycle"] for i in range(n)}


@pytest.mark.slow
def test_model_is_reused_across_decoder_settings_but_not_across_dtypes(
    tiny: list[str], tmp_path: Path
) -> None:
    sweep_dir = tmp_path / "sweep"
    grid = ["decoder=greedy,standard", "model.dtype=float32,bfloat16"]
    assert sweep(tiny, sweep_dir, *grid) == 0
    # grid: 0 greedy/f32, 1 greedy/bf16, 2 standard/f32, 3 standard/bf16; grouped by dtype
    assert plan(sweep_dir)["run_order"] == [0, 2, 1, 3]
    assert plan(sweep_dir)["model_loads"] == 2
    life = lifecycle(sweep_dir, 4)
    assert [life[i]["model_reused"] for i in (0, 2, 1, 3)] == [False, True, False, True]
    assert life[2]["load_s"] == 0.0 and life[3]["load_s"] == 0.0
    assert life[0]["load_s"] > 0 and life[1]["load_s"] > 0
    assert result(sweep_dir, 1)["dtype"] == "bfloat16"


@pytest.mark.slow
def test_model_reuse_can_be_turned_off(tiny: list[str], tmp_path: Path) -> None:
    sweep_dir = tmp_path / "sweep"
    assert sweep(tiny, sweep_dir, "decoder=greedy,standard", "sweep.reuse_model=false") == 0
    assert plan(sweep_dir)["reuse_model"] is False and plan(sweep_dir)["model_loads"] == 2
    assert all(not life["model_reused"] for life in lifecycle(sweep_dir, 2).values())


# --------------------------------------------------------------------------- cluster preset
def test_slurm_gpu_preset_asks_for_one_gpu_per_point(capsys: pytest.CaptureFixture) -> None:
    import yaml

    code = main(
        [
            "hydra/launcher=slurm_gpu",
            "hydra.launcher.partition=gpu",
            "--cfg",
            "hydra",
            "-p",
            "hydra.launcher",
        ]
    )
    assert code == 0
    launcher = yaml.safe_load(capsys.readouterr().out)
    assert launcher["_target_"].endswith("submitit_launcher.SlurmLauncher")
    assert launcher["partition"] == "gpu"
    assert launcher["gpus_per_task"] == 1 and launcher["tasks_per_node"] == 1
    assert launcher["timeout_min"] > 0


def test_a_launcher_that_cannot_start_fails_every_point_with_its_reason(
    tiny: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without SLURM, submitit refuses the batch: each point records why; exit 4."""
    path = os.environ.get("PATH", "").split(os.pathsep)
    slurm_dirs = {str(Path(d)) for d in path if d and (Path(d) / "srun").exists()}
    monkeypatch.setenv("PATH", os.pathsep.join(d for d in path if str(Path(d)) not in slurm_dirs))
    assert shutil.which("srun") is None  # SLURM's client installed here is out of reach
    sweep_dir = tmp_path / "sweep"
    code = sweep(tiny, sweep_dir, "hydra/launcher=slurm_gpu", "pytorch.batch_size=1,2")
    assert code == 4
    assert plan(sweep_dir)["batch_size"] == 2  # a cluster launcher gets the whole batch
    for i in range(2):
        r = result(sweep_dir, i)
        assert r["status"] == "failed"
        assert r["error"]["type"] == "RuntimeError" and "srun" in r["error"]["message"]
        assert r["sweep"]["grid_index"] == i
    assert json.loads((sweep_dir / "sweep_plan.json").read_text())["reuse_model"] is False


# --------------------------------------------------------------------------- one sweep at a time
@pytest.mark.slow
def test_a_sweep_into_a_directory_another_sweep_holds_stops_with_exit_3(
    tiny: list[str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from llem.sweep.lock import SweepLock

    sweep_dir = tmp_path / "sweep"
    held = SweepLock(sweep_dir).acquire()  # as a sweep running in another process holds it
    try:
        (sweep_dir / "0").mkdir()
        (sweep_dir / "0" / "theirs.txt").write_text("a point of the running sweep")
        code = sweep(tiny, sweep_dir, "pytorch.batch_size=1,2")
        err = capsys.readouterr().err
        assert code == 3, err
        assert [line for line in err.splitlines() if line.startswith("error:")] == [
            f"error: another llem sweep is running in {sweep_dir}: wait for it to finish, "
            "or give this one another hydra.sweep.dir"
        ]
        assert sorted(p.name for p in sweep_dir.iterdir()) == [".llem-sweep.lock", "0"]
        assert (sweep_dir / "0" / "theirs.txt").exists()
    finally:
        held.release()
    # once the other sweep has finished, the same command runs
    assert sweep(tiny, sweep_dir, "pytorch.batch_size=1,2") == 0
    assert plan(sweep_dir)["run_order"] == [0, 1]


# --------------------------------------------------------------------------- progress
@pytest.mark.slow
def test_a_sweep_written_to_a_file_logs_each_point_s_start_and_end(
    tiny: list[str], tmp_path: Path, capfd: pytest.CaptureFixture
) -> None:
    """docs/sweeps.md: where the output is no terminal, progress is plain lines, ``point k/N
    (#index) [knobs] · elapsed · ETA`` when a point starts and ``finished k/N (#index) [knobs]:
    status · ...`` when it ends, also for the points run in this process."""
    sweep_dir = tmp_path / "sweep"
    assert sweep(tiny, sweep_dir, "decoder=greedy,standard", "hydra.sweeper.progress=plain") == 0
    text = "".join(capfd.readouterr())
    lines = [line for line in text.splitlines() if re.search(r"\b(point|finished) \d/2 ", line)]
    assert [re.sub(r".*?\b(point|finished) ", r"\1 ", line).split(" · ")[0] for line in lines] == [
        "point 1/2 (#0) [decoder=greedy]",
        "finished 1/2 (#0) [decoder=greedy]: ok",
        "point 2/2 (#1) [decoder=standard]",
        "finished 2/2 (#1) [decoder=standard]: ok",
    ], text
    assert "ETA" in lines[1]  # the time left, from the first point's
