"""``timeline.png`` for a report over a single run: power and temperature from timeseries.csv
(whichever of the two it has samples of; the title names what is drawn, and says "replayed" where
the power was a recorded trace played back, ``measurement.energy=replay``).

:func:`read_timeseries` reads the file, :func:`prepare_timeline` turns it and the run's row into a
:class:`TimelinePlot` (the lines and levels drawn), :func:`draw_timeline` draws it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from llem.measure.timeseries import TIMESERIES_FILE
from llem.report.cells import is_missing
from llem.report.labels import format_number
from llem.report.plots.common import PlotSkipped
from llem.report.plots.style import new_figure, save, side_legend, style_axes, titles
from llem.report.stats import VALID, judged_invalid

#: energy.source of a run whose power was a recorded trace played back
REPLAY_SOURCE = "replay"
PANELS = (("power_w", "power (W)"), ("temperature_c", "temperature (°C)"))
#: the title names what is drawn: "Power", "Temperature" or "Power and temperature"
TITLES = {"power_w": "power", "temperature_c": "temperature"}
#: levels drawn across the power panel: (result field, line style, legend text)
LEVELS = (
    ("energy.idle_power_w", "--", "idle"),
    ("energy.avg_power_w", ":", "average in window"),
)


@dataclass(frozen=True)
class TimelineLine:
    label: str | None  # "device N" when there are several devices
    t: tuple[float, ...]  # seconds since the first sample
    values: tuple[float, ...]  # NaN where a sample has no value


@dataclass(frozen=True)
class TimelineLevel:
    """A horizontal line: a level from result.json (idle power, average power)."""

    value: float
    style: str
    label: str


@dataclass(frozen=True)
class TimelinePanel:
    ylabel: str
    lines: tuple[TimelineLine, ...]
    levels: tuple[TimelineLevel, ...] = ()
    from_zero: bool = False  # the y axis starts at 0 (power)


@dataclass(frozen=True)
class TimelinePlot:
    title: str
    note: str
    panels: tuple[TimelinePanel, ...]
    xlabel: str = "time since first sample (s)"


def read_timeseries(run_dir: Path) -> pd.DataFrame:
    """A run's timeseries.csv; raises PlotSkipped when it is absent, unreadable or empty."""
    ts_file = Path(run_dir) / TIMESERIES_FILE
    if not ts_file.is_file():
        raise PlotSkipped(f"{ts_file} does not exist")
    try:
        ts = pd.read_csv(ts_file)
    except (OSError, ValueError) as exc:
        raise PlotSkipped(f"cannot read {ts_file}: {exc}") from exc
    if ts.empty or "time_s" not in ts.columns:
        raise PlotSkipped(f"{ts_file} has no samples")
    return ts


def _numbers(column: pd.Series) -> pd.Series:
    return pd.to_numeric(column, errors="coerce")


def _levels(row: Mapping[str, Any]) -> tuple[TimelineLevel, ...]:
    out = []
    for key, style, text in LEVELS:
        value = row.get(key)
        if isinstance(value, (int, float)) and not is_missing(value):
            out.append(TimelineLevel(float(value), style, f"{text} {format_number(value)} W"))
    return tuple(out)


def prepare_timeline(ts: pd.DataFrame, row: Mapping[str, Any], source: Path) -> TimelinePlot:
    """Power and temperature against time, one line per device. ``row`` is the run's
    results.csv row (the idle and average power levels), ``source`` the file ``ts`` came from."""
    columns = [
        (c, label) for c, label in PANELS if c in ts.columns and _numbers(ts[c]).notna().any()
    ]
    if not columns:
        raise PlotSkipped(f"{source} has no power or temperature samples")
    groups = list(ts.groupby("device", sort=True)) if "device" in ts.columns else [("", ts)]
    t = _numbers(ts["time_s"])
    t0 = float(t.min()) if t.notna().any() else 0.0
    panels = []
    for column, ylabel in columns:
        lines = tuple(
            TimelineLine(
                label=f"device {device}" if len(groups) > 1 else None,
                t=tuple((_numbers(part["time_s"]) - t0).tolist()),
                values=tuple(_numbers(part[column]).tolist()),
            )
            for device, part in groups
        )
        power = column == "power_w"
        panels.append(TimelinePanel(ylabel, lines, _levels(row) if power else (), power))
    model = row.get("model")
    what = f" — {model}" if isinstance(model, str) and model else ""
    where = "/".join(source.parent.parts[-2:])
    invalid = (
        "; energy judged invalid (see validity.problems)" if judged_invalid(row.get(VALID)) else ""
    )
    plotted = " and ".join(TITLES[column] for column, _ in columns)
    replay = _replayed(row)
    return TimelinePlot(
        title=f"{plotted[0].upper()}{plotted[1:]}{' (replayed)' if replay else ''}{what}",
        note=f"{where}: {len(ts)} samples from {TIMESERIES_FILE}{replay}{invalid}",
        panels=tuple(panels),
    )


def _replayed(row: Mapping[str, Any]) -> str:
    """'; replayed from trace.csv (measurement.energy=replay), not measured' for a run whose
    power was a recorded trace played back (``llem.measure.replay``); '' otherwise."""
    if row.get("energy.source") != REPLAY_SOURCE:
        return ""
    trace = row.get("measurement.replay_trace")
    gpu = row.get("hardware.gpu_model")
    if (is_missing(trace) or not trace) and isinstance(gpu, str) and gpu.startswith("replay:"):
        trace = gpu.removeprefix("replay:")
    name = f" from {Path(str(trace)).name}" if not is_missing(trace) and trace else ""
    return f"; power replayed{name} (measurement.energy=replay), not measured"


def draw_timeline(plot: TimelinePlot, path: Path | None = None) -> Any:
    """Draw ``plot`` on a new Agg figure, write it to ``path`` as a PNG; return the figure."""
    fig = new_figure((8.0, 2.6 + 2.0 * len(plot.panels)))
    axes = fig.subplots(len(plot.panels), 1, sharex=True, squeeze=False)[:, 0]
    for ax, panel in zip(axes, plot.panels, strict=True):
        for line in panel.lines:
            ax.plot(list(line.t), list(line.values), linewidth=1.3, label=line.label)
        for level in panel.levels:
            ax.axhline(
                level.value, linestyle=level.style, color="0.35", linewidth=1.0, label=level.label
            )
        if panel.from_zero:
            ax.set_ylim(bottom=0)
        ax.set_ylabel(panel.ylabel)
        if ax.get_legend_handles_labels()[0]:
            side_legend(ax)
        style_axes(ax)
    axes[-1].set_xlabel(plot.xlabel)
    titles(fig, axes[0], plot.title, plot.note)
    return save(fig, path)


def timeline_figure(run_dir: Path, row: Mapping[str, Any]) -> Any:
    """The figure of :func:`prepare_timeline` for the run in ``run_dir`` (not written anywhere)."""
    return draw_timeline(
        prepare_timeline(read_timeseries(run_dir), row, Path(run_dir) / TIMESERIES_FILE)
    )
