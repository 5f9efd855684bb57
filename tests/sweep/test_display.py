"""The live sweep display (terminal) and the plain lines (everywhere else)."""

from __future__ import annotations

import io
import logging

import pytest
from rich.console import Console

from llem.sweep import display
from llem.sweep.display import LiveSweepDisplay
from llem.sweep.progress import SweepProgress


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def render(d: LiveSweepDisplay) -> str:
    console = Console(file=io.StringIO(), width=140, color_system=None)
    console.print(d)
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_the_display_shows_counts_the_current_point_elapsed_and_eta() -> None:
    clock = Clock()
    p = SweepProgress(4, clock=clock, skipped=2, already_done=1)
    d = LiveSweepDisplay(p)
    p.starting(1, 0, "pytorch.batch_size=1")
    clock.t = 10
    p.done(0, "pytorch.batch_size=1", "ok")
    p.starting(2, 3, "pytorch.batch_size=8")
    clock.t = 20
    p.done(3, "pytorch.batch_size=8", "failed")
    p.starting(3, 5, "decoder=creative pytorch.batch_size=4")
    text = render(d)
    assert "2/4 · 1 ok · 1 failed · 2 skipped · 1 already done · elapsed 20s · ETA 20s" in text
    assert "now #5 [decoder=creative pytorch.batch_size=4]" in text


def test_the_eta_counts_down_while_a_point_runs() -> None:
    clock = Clock()
    p = SweepProgress(3, clock=clock)
    p.starting(1, 0, "a=1")
    clock.t = 10
    p.done(0, "a=1", "ok")
    assert p.eta_s() == 20  # two points left at 10 s each
    p.starting(2, 1, "a=2")
    clock.t = 15
    assert p.eta_s() == 15  # 5 s into the second point
    clock.t = 40
    assert p.eta_s() == 10  # the second point overran: the third's 10 s are left at least


def test_live_progress_logs_only_failures(caplog: pytest.LogCaptureFixture) -> None:
    p = SweepProgress(3)
    p.live = True
    with caplog.at_level(logging.INFO, logger="llem.sweep"):
        p.starting(1, 0, "a=1")
        p.done(0, "a=1", "ok")
        p.starting(2, 1, "a=2")
        p.done(1, "a=2", "failed")
    assert [r.getMessage().split(" · ")[0] for r in caplog.records] == [
        "finished 2/3 (#1) [a=2]: failed"
    ]


def test_plain_progress_logs_the_lines_it_always_did(caplog: pytest.LogCaptureFixture) -> None:
    p = SweepProgress(2)
    with caplog.at_level(logging.INFO, logger="llem.sweep"):
        p.starting(1, 0, "a=1")
        p.done(0, "a=1", "ok")
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("point 1/2 (#0) [a=1] · elapsed")
    assert lines[1].startswith("finished 1/2 (#0) [a=1]: ok · elapsed")


def test_log_lines_go_above_the_display_and_handlers_get_their_streams_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A handler writing to the terminal would tear the display: it writes through rich."""
    import sys

    out = Tty()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", Tty())
    handler = logging.StreamHandler(out)
    logger = logging.getLogger("llem.test.display")
    logger.addHandler(handler)
    terminal: list[bool] = []
    try:
        with LiveSweepDisplay(SweepProgress(1), on_terminal=terminal.append):
            assert terminal == [True]  # the runner hears that the terminal is taken
            assert handler.stream is not out  # rich's proxy, which prints above the display
            assert getattr(handler.stream, "rich_proxied_file", None) is out
            logger.warning("a line from a run")
        assert handler.stream is out and terminal == [True, False]
    finally:
        logger.removeHandler(handler)
    assert "a line from a run" in out.getvalue()


def test_auto_means_live_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setattr(sys, "stdout", io.StringIO())
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert not display.wanted("auto") and display.wanted("live") and not display.wanted("plain")
    monkeypatch.setattr(sys, "stdout", Tty())
    monkeypatch.setattr(sys, "stderr", Tty())
    assert display.wanted("auto") and not display.wanted("plain")


@pytest.mark.parametrize("tick", [False, True])
def test_the_display_redraws_on_progress_with_a_thread_only_when_it_ticks(
    tick: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys
    import threading

    out = Tty()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", Tty())
    before = set(threading.enumerate())
    p = SweepProgress(2)
    with LiveSweepDisplay(p, tick=tick):
        started = set(threading.enumerate()) - before
        p.starting(1, 7, "repeat=0")
        assert "now #7 [repeat=0]" in out.getvalue()  # drawn when the point starts
    # a thread beside the points only for a cluster's launcher (tick=True)
    assert bool(started) is tick
    assert p.on_change is None
