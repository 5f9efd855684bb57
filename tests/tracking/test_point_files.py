"""A point's timeline as planted in timeseries.csv (an unreadable cell is no point, never a 0;
steps in ms since the window's start), its files, and a search's best from search.json."""

from __future__ import annotations

from pathlib import Path

from llem.tracking.point_files import artifacts, search_best, timeline

from .wandb_files import TIMELINE, plant_point_files, plant_result, plant_search


def _history(points: list) -> dict[str, list[tuple[int, float]]]:
    out: dict[str, list[tuple[int, float]]] = {}
    for p in points:
        out.setdefault(p.key, []).append((p.step_ms, p.value))
    return out


def test_the_timeline_is_each_reading_at_its_millisecond(tmp_path: Path) -> None:
    plant_result(tmp_path, 1, "2026-11-28T10:00:00")
    assert timeline(tmp_path) == [] and artifacts(tmp_path) == [tmp_path / "result.json"]
    plant_point_files(tmp_path)
    assert _history(timeline(tmp_path)) == TIMELINE
    names = [p.name for p in artifacts(tmp_path)]
    assert names == ["result.json", "requests.jsonl", "plots"]


def test_two_devices_each_have_their_own_history(tmp_path: Path) -> None:
    (tmp_path / "timeseries.csv").write_text(
        "time_s,device,power_w\n0.0,0,100\n0.0,1,90\n0.5,0,110\n0.5,1,\n0.75,1,nan\n"
    )
    assert _history(timeline(tmp_path)) == {
        "timeline.0.power_w": [(0, 100.0), (500, 110.0)],
        "timeline.1.power_w": [(0, 90.0)],
    }


def test_a_search_best_and_its_confirmations_are_tags(tmp_path: Path) -> None:
    assert search_best(tmp_path) is None  # a grid: no search.json
    plant_search(tmp_path)
    assert search_best(tmp_path) == {
        "search.objective": "minimize energy.per_output_token_j",
        "search.state": "finished",
        "search.trials": "4",
        "search.confirm": "2",
        "search.confirmations": "2",
        "search.stopped_because": "budget of 2 trials spent",
        "search.best": "#1",
        "search.best_runs": "3",
        "search.best_mean.energy.per_output_token_j": "12.5",
        "best.pytorch.batch_size": "4",
    }
