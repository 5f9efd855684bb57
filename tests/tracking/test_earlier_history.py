"""What a re-run point's W&B run says of the earlier attempt's history it still holds, from
tracking.json's entry for the point: nothing where no attempt logged a timeline, the step where
one did, and that the step is unknown where an older tracking.json did not keep it."""

from __future__ import annotations

from llem.tracking.earlier_history import TAG, UNKNOWN, Earlier, from_entry, held_after, marks


def test_an_entry_gives_the_earlier_attempt_and_the_step_its_run_holds() -> None:
    assert from_entry(None) is None and from_entry([None, None]) is None  # not logged yet
    assert from_entry(["id", "t1", 2500]) == Earlier("t1", 2500)
    assert from_entry(["id", "t1", None]) == Earlier("t1", None)  # it logged no history
    assert from_entry(["id", "t1"]) == Earlier("t1", UNKNOWN)  # an older tracking.json


def test_the_run_holds_the_longest_history_logged_into_it() -> None:
    assert held_after(None, []) is None
    assert held_after(None, [0, 250, 1000]) == 1000
    assert held_after(Earlier("t1", 2500), [0, 1000]) == 2500  # W&B dropped the new rows
    assert held_after(Earlier("t1", 500), [0, 1000]) == 1000
    assert held_after(Earlier("t1", UNKNOWN), [0, 1000]) == UNKNOWN


def test_only_a_run_over_an_earlier_history_is_marked() -> None:
    cleared = {"history_earlier_to_step_ms": None, "history_earlier_started_at": None}
    assert marks(None, "t2") == ([], None, cleared)
    assert marks(Earlier("t1", None), "t2") == ([], None, cleared)
    tags, note, config = marks(Earlier("t1", 2500), "t2")
    assert tags == [TAG] and len(TAG) <= 64
    assert note is not None and "history up to step 2500 (ms since the window's start)" in note
    assert config == {"history_earlier_to_step_ms": 2500, "history_earlier_started_at": "t1"}
    tags, note, config = marks(Earlier("t1", UNKNOWN), "t2")
    assert tags == [TAG] and note is not None and "did not record" in note
    assert config["history_earlier_to_step_ms"] == UNKNOWN
