"""A sweep as a W&B group, written offline and read back through wandb's own reader: a run per
point (its overrides and composed configuration as config, its figures as summary metrics, a
null figure absent with its reason in the config), a sweep run of job_type "sweep" in the same
group; nothing connects to the network; a resumed sweep logs no point twice and a re-run point
keeps its run id; the API key is written nowhere."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest

from .wandb_files import (
    SECRET,
    THROUGHPUT,
    TIMELINE,
    Listener,
    grep,
    plant_point_files,
    plant_result,
    plant_search,
    plant_sweep,
    runs,
)

pytestmark = [
    pytest.mark.wandb,
    pytest.mark.skipif(
        importlib.util.find_spec("wandb") is None,
        reason="needs wandb (pip install 'llem[tracking]')",
    ),
]


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch):
    """W&B's server at a local port that counts connections; a planted API key."""
    listener = Listener()
    monkeypatch.setenv("WANDB_BASE_URL", listener.url)
    monkeypatch.setenv("WANDB_API_KEY", SECRET)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    yield listener
    listener.close()


def _tracker():
    from llem.tracking.wandb_runs import WandbTracker

    return WandbTracker("llem-test", None, "offline", None, timeout_s=5.0)


def test_a_sweep_is_a_group_of_runs(no_network: Listener, tmp_path: Path) -> None:
    sweep = tmp_path / "multirun" / "sweep"
    plant_sweep(sweep, [1, 4])
    plant_point_files(sweep / "0")
    plant_search(sweep)
    start = time.monotonic()
    assert _tracker().end_sweep(sweep) == (2, 2)
    took = time.monotonic() - start
    assert no_network.connections == 0
    assert took < 60, f"{took:.0f} s for 3 offline runs"
    logged = runs(sweep / "wandb")
    by_job = {r["run"]["job_type"]: [] for r in logged}
    for r in logged:
        by_job[r["run"]["job_type"]].append(r)
    assert sorted(by_job) == ["point", "sweep"] and len(by_job["point"]) == 2
    group = "multirun/sweep"
    assert {r["run"]["run_group"] for r in logged} == {group}
    assert {r["run"]["project"] for r in logged} == {"llem-test"}
    for point in by_job["point"]:
        batch = int(point["config"]["overrides"]["pytorch.batch_size"])
        assert point["config"]["config"]["pytorch"]["batch_size"] == batch
        assert point["run"]["display_name"] == f"#{[1, 4].index(batch)} pytorch.batch_size={batch}"
        s = point["summary"]
        assert s["workload.output_tokens"] == 8 * batch
        assert s["throughput.output_tokens_per_s"] == 10.0 + batch
        assert s["latency.ttft_ms.p50"] == 3.5 * batch
        assert "energy.total_j" not in s  # null, never a 0
        reasons = point["config"]["null_reasons"]
        assert reasons["energy.total_j"] == "disabled by measurement.energy=none"
        assert set(point["run"]["tags"]) == {"status:ok", "energy_valid:unknown"}
        assert point["artifacts"] == [f"point-{point['run']['run_id']}"]
        assert point["exit_code"] == 0
        if batch == 1:  # point 0: its files, its timeline and throughput at the planted steps
            assert point["files"] == ["plots/timeline.png", "requests.jsonl", "result.json"]
            history = {
                k: [(row["_step"], row[k]) for row in point["history"] if k in row]
                for k in {**TIMELINE, **THROUGHPUT}
            }
            assert history == {**TIMELINE, **THROUGHPUT}
            assert sorted(reasons) == ["energy.total_j"]
        else:  # no timeseries.csv, no steps.csv: no history, the throughput's reason said
            assert point["files"] == ["result.json"] and point["history"] == []
            assert reasons["timeline.decode_tokens_per_s"] == "the point has no steps.csv"
            assert reasons["timeline.prefill_tokens_per_s"] == "the point has no steps.csv"
    (swept,) = by_job["sweep"]
    assert swept["config"]["swept"] == ["pytorch.batch_size"] and swept["config"]["points"] == 2
    search = swept["config"]["search"]
    assert search["best.pytorch.batch_size"] == "4" and search["search.confirmations"] == "2"
    assert "search.json" in swept["files"]
    assert grep(SECRET, tmp_path) == []


def test_a_resumed_sweep_logs_no_point_twice(no_network: Listener, tmp_path: Path) -> None:
    from llem.tracking.state import read_section

    sweep = tmp_path / "multirun" / "sweep"
    plant_sweep(sweep, [1, 4])
    tracker = _tracker()
    assert tracker.log_point(sweep, sweep / "0") is True
    first = read_section(sweep, "wandb")["points"]["0"][0]
    assert tracker.log_point(sweep, sweep / "0") is False  # the same result: not again
    # point 1 failed, then re-ran: its run is resumed under the same id
    plant_result(sweep / "1", 4, "2026-11-28T11:00:00", status="failed")
    assert tracker.end_sweep(sweep) == (1, 2)
    failed_id = read_section(sweep, "wandb")["points"]["1"][0]
    plant_result(sweep / "1", 4, "2026-11-28T12:00:00")
    assert _tracker().end_sweep(sweep) == (1, 2)
    state = read_section(sweep, "wandb")
    assert state["points"]["0"][0] == first and state["points"]["1"][0] == failed_id
    logged = runs(sweep / "wandb")
    points = [r for r in logged if r["run"]["job_type"] == "point"]
    assert sorted(r["run"]["run_id"] for r in points) == sorted([first, failed_id, failed_id])
    assert sorted(r["exit_code"] for r in points if r["run"]["run_id"] == failed_id) == [0, 1]
    # no attempt logged a timeline: the re-run's history is its own, nothing to say
    assert state["points"]["1"][2] is None
    assert all("history:earlier-attempt" not in r["run"]["tags"] for r in points)
    assert len({r["run"]["run_id"] for r in logged if r["run"]["job_type"] == "sweep"}) == 1
    assert no_network.connections == 0


def test_a_re_run_point_over_an_earlier_timeline_says_so(
    no_network: Listener, tmp_path: Path
) -> None:
    """W&B keeps a resumed run's history only past its last step: a re-run point whose earlier
    attempt logged a timeline (here up to 1000 ms, THROUGHPUT's last bin) is tagged, and its note
    and config say up to which step its history is the earlier attempt's."""
    from llem.tracking.state import read_section

    sweep = tmp_path / "multirun" / "sweep"
    plant_sweep(sweep, [1, 4])
    plant_point_files(sweep / "1")
    plant_result(sweep / "1", 4, "2026-11-28T11:00:00", status="failed")
    assert _tracker().end_sweep(sweep) == (2, 2)
    run_id, _, held = read_section(sweep, "wandb")["points"]["1"]
    assert held == 1000  # the last step of its history: the throughput's bin at 1000 ms
    plant_result(sweep / "1", 4, "2026-11-28T12:00:00")  # re-ran, with a timeline again
    assert _tracker().end_sweep(sweep) == (1, 2)
    assert read_section(sweep, "wandb")["points"]["1"] == [run_id, "2026-11-28T12:00:00", 1000]
    first, again = [r for r in runs(sweep / "wandb") if r["run"]["run_id"] == run_id]
    assert "history:earlier-attempt" not in first["run"]["tags"] and not first["run"].get("notes")
    assert set(again["run"]["tags"]) == {
        "status:ok",
        "energy_valid:unknown",
        "history:earlier-attempt",
    }
    note = again["run"]["notes"]
    assert "history up to step 1000 (ms since the window's start)" in note
    assert "started 2026-11-28T11:00:00" in note and "(started 2026-11-28T12:00:00)" in note
    llem = again["config"]["llem"]
    assert llem["history_earlier_to_step_ms"] == 1000
    assert llem["history_earlier_started_at"] == "2026-11-28T11:00:00"
    assert no_network.connections == 0


def test_a_single_run_is_one_run_logged_once(no_network: Listener, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    plant_result(run_dir, 2, "2026-11-28T10:00:00")
    tracker = _tracker()
    assert tracker.log_single(run_dir) is True
    assert tracker.log_single(run_dir) is False
    (logged,) = runs(run_dir / "wandb")
    assert logged["run"]["job_type"] == "run" and not logged["run"].get("run_group")
    assert logged["summary"]["workload.output_tokens"] == 16
    # its result replaced by one with a timeline, then by another: the second re-run's run
    # holds the first re-run's timeline up to its last step (1000 ms) and says so
    plant_point_files(run_dir)
    plant_result(run_dir, 2, "2026-11-28T11:00:00")
    assert tracker.log_single(run_dir) is True
    plant_result(run_dir, 2, "2026-11-28T12:00:00")
    assert tracker.log_single(run_dir) is True
    first, second, third = runs(run_dir / "wandb")
    assert [r["run"]["run_id"] for r in (second, third)] == [logged["run"]["run_id"]] * 2
    assert "history:earlier-attempt" not in second["run"]["tags"]
    assert "history:earlier-attempt" in third["run"]["tags"]
    assert third["config"]["llem"]["history_earlier_to_step_ms"] == 1000
    assert no_network.connections == 0


def test_a_refusing_wandb_is_one_warning_and_the_run_goes_on(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Online, with a key W&B refuses: the callback says so once, with the command for later."""
    from omegaconf import OmegaConf

    from llem.tracking.callback import TrackingCallback

    monkeypatch.setenv("WANDB_API_KEY", "short")  # refused before any request: under 40 chars
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")
    run_dir = tmp_path / "run"
    plant_result(run_dir, 2, "2026-11-28T10:00:00")
    tracking = {"kind": "wandb", "project": "p", "entity": None, "mode": "online", "dir": None}
    config = OmegaConf.create(
        {"tracking": {**tracking, "timeout_s": 5.0}, "dry_run": False,
         "hydra": {"mode": "RUN", "runtime": {"output_dir": str(run_dir)}}}
    )  # fmt: skip
    callback = TrackingCallback()
    callback.on_job_end(config)
    callback.on_job_end(config)  # given up: not tried, not said again
    said = [r.getMessage() for r in caplog.records if "tracking:" in r.getMessage()]
    assert len(said) == 1, said
    assert "W&B project p (online) failed (AuthenticationError" in said[0]
    assert f"llem-report --to-wandb {run_dir} --project p --wandb-mode online" in said[0]
