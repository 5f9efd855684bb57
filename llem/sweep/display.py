"""The live sweep display on a terminal (rich): counts, the point running now, elapsed, ETA.

    sweep ━━━━━━━━━╺━━━━━━━ 5/10 · 4 ok · 1 failed · 2 skipped · elapsed 1m12s · ETA 1m12s
      now #6 [decoder=creative pytorch.batch_size=4]

It is drawn at the bottom of the terminal; everything the sweep and its runs print or log scrolls
above it. It is redrawn when the progress changes (a point starts or ends) and when a line is
printed, in the thread that changed or printed it: no thread of its own runs beside the measured
window of a point on this machine. Only where every point runs on other machines (a cluster's
launcher, ``tick=True``) is it also redrawn a few times a second, so that the elapsed time runs.
While it is shown, the standard streams are rich's proxies, and logging handlers that wrote to the
real streams write to the proxies (restored afterwards), so no line tears the display. Where the
output is not a terminal (CI, SLURM job logs, a pipe) there is no display: ``llem.sweep.progress``
logs plain lines instead.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

from llem.sweep.progress import SweepProgress, fmt_s

MODES = ("auto", "live", "plain")


def wanted(mode: str) -> bool:
    """Whether to show the display: ``live``, ``plain``, or ``auto`` (live on a terminal)."""
    if mode == "live":
        return True
    if mode == "plain":
        return False
    try:
        return sys.stdout.isatty() and sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class LiveSweepDisplay:
    """Shows a sweep's ``progress`` until the ``with`` block ends.

    ``on_terminal(True)`` is called once the display holds the terminal and ``on_terminal(False)``
    when it lets it go, so that a run draws no progress line of its own meanwhile.
    """

    def __init__(
        self,
        progress: SweepProgress,
        on_terminal: Callable[[bool], None] | None = None,
        tick: bool = False,
    ) -> None:
        self.progress = progress
        self._on_terminal = on_terminal
        self.tick = tick
        self._live: Any = None
        self._swapped: list[tuple[logging.StreamHandler, Any]] = []

    def __rich__(self) -> Any:
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        p = self.progress
        counts = p.counts
        parts = [f"{p.finished}/{p.total}"]
        parts += [f"{counts.get(s, 0)} {s}" for s in ("ok", "failed")]
        parts.append(f"{p.skipped} skipped")
        if p.already_done:
            parts.append(f"{p.already_done} already done")
        parts.append(f"elapsed {fmt_s(p.elapsed_s)}")
        eta = p.eta_s()
        if eta is not None:
            parts.append(f"ETA {fmt_s(eta)}")
        row = Table.grid(padding=(0, 1))
        row.add_row(
            Text("sweep", style="bold"),
            ProgressBar(total=max(p.total, 1), completed=p.finished, width=30),
            Text(" · ".join(parts), style="red" if counts.get("failed") else ""),
        )
        now = Text(f"  now {p.current}" if p.current else "  ", style="cyan", no_wrap=True)
        if not p.waiting:
            return Group(row, now)
        return Group(row, now, Text(f"  waiting: {p.waiting}", style="yellow", no_wrap=True))

    def __enter__(self) -> LiveSweepDisplay:
        from rich.console import Console
        from rich.live import Live

        console = Console(file=sys.stdout)
        self._live = Live(
            self,
            console=console,
            auto_refresh=self.tick,  # True starts rich's refresh thread
            refresh_per_second=4,
            redirect_stdout=True,
            redirect_stderr=True,
            transient=False,
        )
        real = {id(sys.stdout): "stdout", id(sys.stderr): "stderr"}
        self._live.start()
        self.progress.live = True
        self.progress.on_change = self._live.refresh
        if self._on_terminal is not None:
            self._on_terminal(True)
        proxies: dict[str, Any] = {"stdout": sys.stdout, "stderr": sys.stderr}
        for handler in _stream_handlers():
            which = real.get(id(handler.stream))
            if which is not None:
                self._swapped.append((handler, handler.stream))
                handler.setStream(proxies[which])
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.live = False
        self.progress.on_change = None
        if self._on_terminal is not None:
            self._on_terminal(False)
        self.progress.current = ""
        try:
            self._live.refresh()
            self._live.stop()
        finally:
            for handler, stream in self._swapped:
                handler.setStream(stream)
            # Handlers created while the display ran (a job's logging) hold a proxy: point them
            # at the real stream again.
            for handler in _stream_handlers():
                real: Any | None = getattr(handler.stream, "rich_proxied_file", None)
                if real is not None:
                    handler.setStream(real)


def _stream_handlers() -> list[logging.StreamHandler]:
    loggers: list[Any] = [logging.getLogger()]
    loggers += [
        lg for lg in logging.Logger.manager.loggerDict.values() if isinstance(lg, logging.Logger)
    ]
    seen: dict[int, logging.StreamHandler] = {}
    for lg in loggers:
        for h in lg.handlers:
            if type(h) is logging.StreamHandler:  # not FileHandler (a StreamHandler subclass)
                seen[id(h)] = h
    return list(seen.values())
