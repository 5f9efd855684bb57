"""The search sweeper for real: ``--multirun hydra/sweeper=llem_search`` on the tiny model (CPU),
through llem's entrypoint in this process: trials, search.json, resume, bad declarations."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

import pytest

from llem.app.entrypoint import main

from .conftest import NO_REPORT, result

pytest.importorskip("optuna")

SEARCH = "hydra/sweeper=llem_search"
QUICK = ["dataset.n_prompts=8", "measurement.warmup=0", "measurement.min_window_s=0"]
# A throughput objective under a latency constraint, and a constraint on a figure that is known
# before the run (the running batch is the batch size): batch 8 is infeasible whatever it measures.
THROUGHPUT = [
    "hydra.sweeper.objective=throughput.output_tokens_per_s",
    "hydra.sweeper.direction=maximize",
    "hydra.sweeper.constraints=['latency.ttft_ms.p90 <= 60000','concurrency.running_max <= 4']",
]
SPACE = ["pytorch.batch_size=1,2,4,8", "decoder.max_new_tokens=2,3"]


@pytest.fixture(autouse=True)
def _keep_argv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", list(sys.argv))


def search(tiny: list[str], d: Path, *args: str) -> int:
    return main(["--multirun", SEARCH, *tiny, *QUICK, NO_REPORT, f"hydra.sweep.dir={d}", *args])


def record(d: Path) -> dict[str, Any]:
    return json.loads((d / "search.json").read_text())


def knobs(trial: dict[str, Any]) -> tuple:
    return tuple(sorted(trial["knobs"].items()))


@pytest.mark.slow
def test_a_budget_6_search_runs_resumes_and_never_reruns_a_finished_trial(
    tiny: list[str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    d = tmp_path / "search"
    assert search(tiny, d, *THROUGHPUT, "hydra.sweeper.budget=4", *SPACE) == 0
    first = record(d)
    assert [t["dir"] for t in first["trials"]] == ["0", "1", "2", "3"]
    started = {t["dir"]: result(d, int(t["dir"]))["started_at"] for t in first["trials"]}

    # The same command with a larger budget: the 4 finished trials are told, 2 new ones run.
    assert search(tiny, d, *THROUGHPUT, "hydra.sweeper.budget=6", *SPACE) == 0
    rec = record(d)
    trials = rec["trials"]
    assert len(trials) == 6 and rec["state"] == "finished"
    assert "budget of 6 trials was spent" in rec["stopped_because"]
    assert [t["resumed"] for t in trials] == [True] * 4 + [False] * 2
    assert len({knobs(t) for t in trials}) == 6  # no configuration measured twice
    for t in trials[:4]:  # not re-run: the same result files
        assert result(d, int(t["dir"]))["started_at"] == started[t["dir"]]
    for t in trials:
        res = result(d, int(t["dir"]))
        assert res["status"] == "ok"
        size = int(t["knobs"]["pytorch.batch_size"])
        assert res["config"]["pytorch"]["batch_size"] == size
        assert t["objective"] == pytest.approx(res["throughput"]["output_tokens_per_s"])
        assert t["feasible"] == (size <= 4)
        if size > 4:
            assert "concurrency.running_max <= 4: measured 8" in t["why_not"]
    feasible = [t for t in trials if t["feasible"]]
    best = next(t for t in trials if t["number"] == rec["best"])
    assert best["objective"] == max(t["objective"] for t in feasible)
    out = capsys.readouterr().out
    assert "resumed: 4 trial(s) of this search found finished, not run again" in out
    assert "best feasible: #" in out

    # Once more: the budget is spent, nothing runs and nothing changes.
    before = {t["dir"]: result(d, int(t["dir"]))["started_at"] for t in trials}
    assert search(tiny, d, *THROUGHPUT, "hydra.sweeper.budget=6", *SPACE) == 0
    assert len(record(d)["trials"]) == 6
    assert {t["dir"]: result(d, int(t["dir"]))["started_at"] for t in trials} == before


@pytest.mark.slow
def test_an_interrupted_trial_is_moved_aside_and_run_again(tiny: list[str], tmp_path: Path) -> None:
    d = tmp_path / "search"
    args = [*THROUGHPUT, "hydra.sweeper.budget=2", "pytorch.batch_size=1,2,4"]
    assert search(tiny, d, *args) == 0
    res = result(d, 1)
    res["status"] = "failed"
    res["error"] = {"type": "KeyboardInterrupt", "message": "interrupted", "hint": None}
    (d / "1" / "result.json").write_text(json.dumps(res))
    assert search(tiny, d, *args) == 0
    trials = record(d)["trials"]
    assert [(t["dir"], t["resumed"], t["status"]) for t in trials] == [
        ("0", True, "ok"),
        ("1", False, "ok"),
    ]
    assert list((d / "superseded").rglob("1/result.json"))


@pytest.mark.slow
def test_an_energy_objective_searches_on_a_replayed_trace(tiny: list[str], tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("time_s,device,power_w\n0,GPU-replay-0,200\n3600,GPU-replay-0,200\n")
    d = tmp_path / "search"
    code = search(
        tiny,
        d,
        "measurement.energy=replay",
        f"measurement.replay_trace={trace}",
        "measurement.idle_baseline_s=0",
        "measurement.min_valid_window_s=0",  # a short window's energy would not count
        "hydra.sweeper.objective=energy.j_per_output_token",
        "hydra.sweeper.budget=2",
        "hydra.sweeper.confirm=1",
        "pytorch.batch_size=1,4",
    )
    assert code == 0
    rec = record(d)
    trials = rec["trials"]
    for t in trials:
        energy = result(d, int(t["dir"]))["energy"]
        assert t["objective"] == pytest.approx(energy["j_per_output_token"])
    # Under a constant replayed power J/token is power / tokens per second, which the machine's
    # load sets: which batch size wins is not known, and a slow confirmation can make the other
    # one best. What the search promises is: the best has the least mean over its runs.
    runs: dict[tuple, list[dict[str, Any]]] = {}
    for t in trials:
        runs.setdefault(knobs(t), []).append(t)
    means = {
        k: statistics.fmean(t["objective"] for t in ts)
        for k, ts in runs.items()
        if all(t["feasible"] for t in ts)
    }
    best = next(t for t in trials if t["number"] == rec["best"])
    assert best["kind"] == "search"
    assert rec["best_mean"] == pytest.approx(means[knobs(best)])
    assert rec["best_mean"] == pytest.approx(min(means.values()))
    assert rec["best_runs"] == len(runs[knobs(best)]) == 2  # its search trial and confirmation
    # The best search trial is measured once more first, as repeat 1 of the same configuration,
    # in its own directory; one that then loses has the other confirmed in turn.
    searched = [t for t in trials if t["kind"] == "search"]
    confirms = [t for t in trials if t["kind"] == "confirm"]
    assert confirms[0]["dir"] == "2"
    assert knobs(confirms[0]) == knobs(min(searched, key=lambda t: t["objective"]))
    for again in confirms:
        (first,) = [t for t in searched if knobs(t) == knobs(again)]
        assert result(d, int(again["dir"]))["config"]["repeat"] == 1
        assert result(d, int(again["dir"]))["config_hash"] == first["config_hash"]
        assert first["config_hash"] == result(d, int(first["dir"]))["config_hash"]


@pytest.mark.slow
def test_an_invalid_combination_is_an_infeasible_trial_that_never_runs(
    tiny: list[str], tmp_path: Path
) -> None:
    d = tmp_path / "search"
    code = search(
        tiny,
        d,
        *THROUGHPUT,
        "hydra.sweeper.budget=6",
        "speculative=ngram",
        "pytorch.num_beams=1,2",
        "decoder.max_new_tokens=2,3",
    )
    assert code == 0
    rec = record(d)
    assert "every configuration of the space (4) was measured" in rec["stopped_because"]
    skipped = [t for t in rec["trials"] if t["status"] == "skipped"]
    assert {t["knobs"]["pytorch.num_beams"] for t in skipped} == {"2"} and len(skipped) == 2
    for t in skipped:
        assert not t["feasible"] and "skipped" in t["why_not"]
        assert result(d, int(t["dir"]))["status"] == "skipped"
    assert rec["best"] is not None


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["hydra.sweeper.objective=throughput.tok"], "hydra.sweeper.objective=throughput.tok"),
        (
            ["hydra.sweeper.objective=throughput.output_tokens_per_s", "hydra.sweeper.budget=0"],
            "hydra.sweeper.budget=0",
        ),
        (
            [
                "hydra.sweeper.objective=throughput.output_tokens_per_s",
                "hydra.sweeper.constraints=['latency.tpot_ms.p90 below 50']",
            ],
            "hydra.sweeper.constraints[0]='latency.tpot_ms.p90 below 50'",
        ),
        (
            [
                "hydra.sweeper.objective=throughput.output_tokens_per_s",
                "hydra.sweeper.constraints=['latency.tpot.p90 <= 50']",
            ],
            "hydra.sweeper.constraints[0]=latency.tpot.p90",
        ),
        (["hydra.sweeper.objective=energy.j_per_output_token"], "hydra.sweeper.objective"),
    ],
)
def test_a_bad_declaration_is_one_line_and_exit_2_before_anything_runs(
    tiny: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    args: list[str],
    names: str,
) -> None:
    d = tmp_path / "search"
    assert search(tiny, d, *args, "pytorch.batch_size=1,2") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith(f"error: {names}"), err
    assert "Traceback" not in "\n".join(err)
    assert not d.exists() or not list(d.glob("*/result.json"))


def test_energy_on_a_cpu_names_the_figures_that_can_be_searched(
    tiny: list[str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    d = tmp_path / "search"
    args = ["hydra.sweeper.objective=energy.j_per_output_token", "pytorch.batch_size=1,2"]
    assert search(tiny, d, *args) == 2
    line = capsys.readouterr().err.strip().splitlines()[0]
    assert "needs measured energy" in line and "throughput.output_tokens_per_s" in line
    assert "measurement.energy=replay" in line


def test_a_dry_run_prints_the_search_and_writes_nothing(
    tiny: list[str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    d = tmp_path / "search"
    assert search(tiny, d, *THROUGHPUT, "dry_run=true", *SPACE) == 0
    out = capsys.readouterr().out
    assert "search plan: maximize throughput.output_tokens_per_s subject to" in out
    assert "8 configurations in the space" in out and "pre-flight ok" in out
    assert not d.exists() or not any(d.iterdir())
