"""What a sweep tells its user while it runs: a line per point, and one screen at the end.

Where the output is not a terminal (CI, a log file, a SLURM job's output), progress goes through
the ``llem.sweep`` logger as plain lines: ``point k/N (#index) [knobs] · elapsed · ETA`` when a
point starts, ``finished k/N (#index) [knobs]: status · ...`` when it ends. On a terminal,
``llem.sweep.display`` draws the same figures as a live display instead (``live`` is set), and
only failed points are logged. When several points run at once (a batch handed to a parallel
launcher), a watcher thread reports each point as its result.json appears.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llem.result import RunResult
from llem.sweep.outcomes import JobOutcome

log = logging.getLogger("llem.sweep")

MAX_LISTED = 10  # failed points listed by name in the end-of-sweep summary; the rest are counted


def fmt_s(seconds: float) -> str:
    """``75`` → ``1m15s``; ``3725`` → ``1h02m05s``."""
    seconds = int(round(max(seconds, 0.0)))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


class SweepProgress:
    """A sweep's progress: finished points against the number to run, and the time left."""

    def __init__(
        self,
        total: int,
        clock: Callable[[], float] = time.perf_counter,
        skipped: int = 0,
        already_done: int = 0,
    ) -> None:
        self.total = total
        self.finished = 0
        self.skipped, self.already_done = skipped, already_done
        self.counts: dict[str, int] = {}  # finished points by status
        self.current = ""  # the point (or batch) running now, for the live display
        self.live = False  # a live display shows the progress: log only failures
        self.waiting = ""  # why points wait in a scheduler's queue ("2 pending: Resources ×2")
        self.on_change: Callable[[], None] | None = None  # the live display's redraw
        self._clock = clock
        self._t0 = clock()
        self._last_done_s = 0.0  # elapsed when the last point finished

    @property
    def elapsed_s(self) -> float:
        return self._clock() - self._t0

    def eta_s(self) -> float | None:
        """Mean time per finished point × points left, less the time the points running now
        have already had (down to the mean × the points after them): it counts down while a
        point runs, never up. None before the first point finishes."""
        if not self.finished:
            return None
        mean_s = self._last_done_s / self.finished
        left = self.total - self.finished
        running_s = self.elapsed_s - self._last_done_s
        return max(mean_s * left - running_s, mean_s * max(left - 1, 0))

    def _timing(self) -> str:
        eta = self.eta_s()
        return f"elapsed {fmt_s(self.elapsed_s)}" + (
            f" · ETA {fmt_s(eta)}" if eta is not None else ""
        )

    def starting(self, position: int, index: int, label: str) -> str:
        line = f"point {position}/{self.total} (#{index}) [{label}] · {self._timing()}"
        self.current = f"#{index} [{label}]"
        if not self.live:
            log.info(line)
        self._changed()
        return line

    def launching(self, first: int, last: int, labels: list[str]) -> str:
        line = (
            f"points {first}-{last}/{self.total} launched together "
            f"({len(labels)} jobs) · {self._timing()}"
        )
        self.current = f"points {first}-{last} ({len(labels)} jobs launched together)"
        if not self.live:
            log.info(line)
        self._changed()
        return line

    def pending(self, reasons: dict[int, str]) -> str:
        """Points whose jobs wait in the queue, by the scheduler's reason; logged (plain) when
        the reasons change, drawn by the live display."""
        counts: dict[str, int] = {}
        for reason in reasons.values():
            counts[reason] = counts.get(reason, 0) + 1
        listed = ", ".join(f"{r} ×{n}" for r, n in sorted(counts.items(), key=lambda rn: -rn[1]))
        text = f"{len(reasons)} pending in the queue: {listed}" if reasons else ""
        if text and text != self.waiting and not self.live:
            log.info("waiting: %s", text)
        self.waiting = text
        self._changed()
        return text

    def done(self, index: int, label: str, status: str) -> str:
        self.finished += 1
        self._last_done_s = self.elapsed_s
        self.counts[status] = self.counts.get(status, 0) + 1
        line = (
            f"finished {self.finished}/{self.total} (#{index}) [{label}]: {status} · "
            f"{self._timing()}"
        )
        if not self.live or status != "ok":
            log.info(line)
        self._changed()
        return line

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()


class ResultWatcher:
    """While a batch runs elsewhere, report each point when a fresh result.json appears."""

    def __init__(
        self,
        progress: SweepProgress,
        dirs: dict[int, Path],
        labels: dict[int, str],
        before: dict[int, Any],
        fingerprint: Callable[[Path], Any],
        interval_s: float = 2.0,
    ) -> None:
        self.progress = progress
        self.dirs = dirs
        self.labels = labels
        self.before = before
        self.fingerprint = fingerprint
        self.interval_s = interval_s
        self.reported: set = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="llem-sweep-watch", daemon=True)

    def __enter__(self) -> ResultWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def poll(self) -> None:
        for index, d in self.dirs.items():
            if index in self.reported:
                continue
            if self.fingerprint(d) == self.before.get(index):
                continue
            result = RunResult.read(d)
            if result is None:
                continue
            self.reported.add(index)
            self.progress.done(index, self.labels[index], result.status)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.poll()
            except Exception:  # never let reporting break a sweep
                log.debug("result watcher", exc_info=True)


def summary_lines(
    outcomes: list[JobOutcome], seconds: float, not_run: int = 0, interrupted: bool = False
) -> list[str]:
    """The end-of-sweep screen: counts, then why points failed, each error once with the points
    it stopped (the first MAX_LISTED errors and points)."""
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.status] = counts.get(o.status, 0) + 1
    parts = [f"{counts.get(s, 0)} {s}" for s in ("ok", "failed", "skipped")]
    if counts.get("done"):
        parts.append(f"{counts['done']} already done")
    if counts.get("interrupted"):
        parts.append(f"{counts['interrupted']} interrupted")
    if not_run:
        parts.append(f"{not_run} not run")
    head = "sweep interrupted after" if interrupted else "sweep finished in"
    lines = [f"{head} {fmt_s(seconds)}: " + " · ".join(parts)]
    by_error: dict[str, list[JobOutcome]] = {}  # identical errors said once, in first order
    for o in outcomes:
        if o.status == "failed":
            by_error.setdefault(o.error or "no reason given", []).append(o)
    groups = list(by_error.items())
    for error, points in groups[:MAX_LISTED]:
        named = ", ".join(f"#{o.index} [{o.label}]" for o in points[:MAX_LISTED])
        more = f" and {len(points) - MAX_LISTED} more" if len(points) > MAX_LISTED else ""
        lines.append(f"  failed {named}{more}: {error}")
    rest = sum(len(points) for _, points in groups[MAX_LISTED:])
    if rest:
        lines.append(f"  ... and {rest} more failed (see results.csv)")
    return lines
