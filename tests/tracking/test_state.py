"""``tracking.json`` keeps one section per tracker: writing W&B's keeps MLflow's, and back."""

from __future__ import annotations

from llem.tracking.state import TrackedRun, read_section, read_state, write_section, write_state


def test_each_tracker_keeps_its_own_section(tmp_path) -> None:
    run = TrackedRun("http://127.0.0.1:5000", "exp", "3", "abc")
    write_state(tmp_path, run)
    write_section(tmp_path, "wandb", {"group": "g", "points": {"0": ["id0", "t0"]}})
    assert read_state(tmp_path) == run
    write_state(tmp_path, TrackedRun("http://127.0.0.1:5000", "exp", "3", "def"))
    assert read_section(tmp_path, "wandb") == {"group": "g", "points": {"0": ["id0", "t0"]}}
    assert read_state(tmp_path).run_id == "def"


def test_a_directory_never_logged_has_no_section(tmp_path) -> None:
    assert read_section(tmp_path, "wandb") == {} and read_state(tmp_path) is None
    (tmp_path / "tracking.json").write_text("not json")
    assert read_section(tmp_path, "wandb") == {} and read_state(tmp_path) is None
