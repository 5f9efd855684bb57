"""The report's plots, drawn with matplotlib's Agg canvas (no pyplot, no display needed).

* ``tokens_per_s_vs_<knob>.png`` and ``j_per_token_vs_<knob>.png`` for every knob that varies:
  the mean over ok repeats, 95% CI error bars where a configuration has at least two, one line per
  combination of the other varying knobs. A missing figure is a gap in its line, never 0.
* ``pareto.png``: every configuration's tokens/s against J/token; the frontier (no other
  configuration is both faster and cheaper) is joined up and labelled with its knob values.
* Invalid energy (runs whose ``valid`` is false) is drawn hollow, with a legend entry "invalid
  energy": by default those runs are left out of the means, and their own mean is a hollow
  marker beside the line (the only marker where every run was invalid); with
  ``--include-invalid`` the mean that includes them is hollow. When the runs ran on different
  hardware, each GPU gets its own line.
* ``timeline.png`` for a report over a single run: power and temperature from timeseries.csv.

Plots that cannot be drawn (energy unavailable everywhere, one configuration only, no timeseries)
are skipped and the reason is returned for the caller to log.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from llem.report.load import Runs, is_missing
from llem.report.stats import (
    GPU,
    N_INVALID,
    N_LEFT_OUT,
    VALID,
    configuration_groups,
    judged_invalid,
    summarise,
)
from llem.report.table import basenames, format_number, gpu_short, knob_headers, shorten

log = logging.getLogger(__name__)

TOKS = "throughput.output_tokens_per_s"
JTOK = "energy.j_per_output_token"
METRIC_LABELS = {
    TOKS: ("throughput (output tokens/s)", "tokens_per_s", "Throughput"),
    JTOK: ("energy per output token (J/token)", "j_per_token", "Energy per output token"),
}
OWN_PATTERNS = ("tokens_per_s_vs_*.png", "j_per_token_vs_*.png", "pareto.png", "timeline.png")
FIGSIZE = (7.5, 4.6)
DPI = 120
MAX_LABEL = 34
INVALID_LABEL = "invalid energy"
#: per summary row: where to draw a hollow "invalid energy" marker (None: nowhere)
Hollow = Sequence[float | None]


def _new_figure(figsize: tuple[float, float] = FIGSIZE):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _values(frame: pd.DataFrame, column: str) -> list[Any]:
    if column not in frame.columns:
        return [None] * len(frame)
    return frame[column].astype(object).tolist()


def _floats(frame: pd.DataFrame, column: str) -> list[float]:
    return [float("nan") if is_missing(v) else float(v) for v in _values(frame, column)]


def _is_numeric(values: Sequence[Any]) -> bool:
    present = [v for v in values if not is_missing(v)]
    return bool(present) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in present
    )


def _safe_name(knob: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", knob)


def _label_value(v: Any) -> str:
    return "—" if is_missing(v) else (v if isinstance(v, str) else format_number(v))


def _clip(text: str, limit: int = MAX_LABEL) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _titles(fig, ax, title: str, note: str) -> None:
    """A bold-ish title with a small grey note under it, both left-aligned."""
    fig.suptitle(title, x=0.01, ha="left", fontsize=12)
    ax.set_title(note, loc="left", fontsize=8, color="0.4")


def _plain_log_ticks(axis) -> None:
    """Log axis ticks at 1-2-5 steps labelled 20, 50, 100 (not 2×10¹)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def _style_axes(ax) -> None:
    ax.grid(True, alpha=0.3, linewidth=0.6)
    ax.spines["top"].set_visible(False)
    ax.spines["right"].set_visible(False)


# --------------------------------------------------------------------------- knob plots


class PlotSkipped(Exception):
    """A plot that cannot be drawn; the message says why."""


def knob_figure(
    summary: pd.DataFrame,
    knobs: Sequence[str],
    knob: str,
    metric: str,
    hollow: Hollow | None = None,
) -> Any:
    """``metric`` against ``knob``: one line per combination of the other knobs.

    ``hollow`` (one entry per summary row, see :func:`invalid_points`) adds hollow markers for
    invalid energy and a legend entry for them.
    """
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FixedLocator, NullLocator

    ylabel, _, title = METRIC_LABELS[metric]
    means = _floats(summary, f"{metric}.mean")
    marks = [float("nan") if v is None else float(v) for v in (hollow or [None] * len(summary))]
    if all(math.isnan(m) for m in means + marks):
        raise PlotSkipped(f"no configuration has {metric}")
    halves = _floats(summary, f"{metric}.ci95_half")
    headers = knob_headers(knobs)
    others = [k for k in knobs if k != knob]
    xs_raw = _values(summary, knob)
    numeric = _is_numeric(xs_raw)

    # x positions: numbers as numbers (log2 when they span a wide ratio), text as categories
    order: list[Any] = []
    for v in xs_raw:
        if not is_missing(v) and v not in order:
            order.append(v)
    if numeric:
        order.sort()
        positive = all(v > 0 for v in order)
        log_x = positive and len(order) >= 3 and max(order) / min(order) >= 8
        position = {v: float(v) for v in order}
    else:
        log_x = False
        position = {v: float(i) for i, v in enumerate(order)}

    series: dict[tuple[str, ...], list[int]] = {}
    for i in range(len(summary)):
        if is_missing(xs_raw[i]):
            continue
        key = tuple(_label_value(_values(summary, k)[i]) for k in others)
        series.setdefault(key, []).append(i)

    fig = _new_figure()
    ax = fig.add_subplot()
    n_series = len(series)
    spread = 0.18 if n_series > 1 else 0.0
    any_ci = False
    for s_idx, (key, idx) in enumerate(series.items()):
        idx = sorted(idx, key=lambda i: position[xs_raw[i]])
        shift = (
            (s_idx - (n_series - 1) / 2) * (spread / max(1, n_series - 1)) if n_series > 1 else 0
        )
        xs = []
        for i in idx:
            x = position[xs_raw[i]]
            if log_x:
                x = x * 2 ** (shift * 0.6)
            elif numeric:
                step = _min_step(list(position.values()))
                x = x + shift * step * 0.5
            else:
                x = x + shift
            xs.append(x)
        ys = [means[i] for i in idx]
        errs = [0.0 if math.isnan(halves[i]) else halves[i] for i in idx]
        any_ci = any_ci or any(e > 0 for e in errs)
        if len(others) == 1:
            label: str | None = shorten(basenames([key[0]])[0], MAX_LABEL)  # title: the knob
        else:
            label = ", ".join(f"{headers[k]}={v}" for k, v in zip(others, key, strict=True)) or None
        bars = ax.errorbar(
            xs,
            ys,
            yerr=errs if any(e > 0 for e in errs) else None,
            marker="o",
            markersize=5,
            # categories have no in-between: a faint line only helps follow one series
            linewidth=1.6 if numeric else 0.9,
            linestyle="-" if numeric else "--",
            capsize=3,
            elinewidth=1.0,
            label=_clip(label) if label else None,
        )
        flagged = [(x, marks[i]) for x, i in zip(xs, idx, strict=True) if not math.isnan(marks[i])]
        if flagged:
            _hollow(ax, flagged, bars.lines[0].get_color())
    if log_x:
        ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(list(position.values())))
    ax.xaxis.set_minor_locator(NullLocator())
    tick_labels = [shorten(t, 24) for t in basenames([_label_value(v) for v in order])]
    ax.set_xticks(list(position.values()), tick_labels)
    if not numeric and sum(len(t) for t in tick_labels) > 60:
        ax.tick_params(axis="x", labelrotation=25)
        for lbl in ax.get_xticklabels():
            lbl.set_horizontalalignment("right")
    if numeric:
        ax.margins(x=0.08)
    else:
        ax.set_xlim(-0.5, len(order) - 0.5)
    ax.set_xlabel(knob)
    ax.set_ylabel(ylabel)
    present = [m for m in means + marks if not math.isnan(m)]
    log_y = min(present) > 0 and max(present) / min(present) >= 10
    if log_y:  # a tenfold spread: a log axis keeps the small values readable
        ax.set_yscale("log")
        _plain_log_ticks(ax.yaxis)
    else:
        ax.set_ylim(bottom=0)
    any_hollow = any(not math.isnan(m) for m in marks)
    bound = metric.startswith("energy.") and any(
        not math.isnan(b) for b in _floats(summary, f"{metric}.bound_mean")
    )
    ci = "95% CI (Student t" + (" + mean per-run bound)" if bound else ")")
    note = "mean of ok repeats" + (f", error bars: {ci}" if any_ci else "")
    note += "; hollow: invalid energy" if any_hollow else ""
    note += "; log scale" if log_y else ""
    _titles(fig, ax, f"{title} vs {headers[knob]}", note)
    if n_series > 1 or any_hollow:
        handles, labels = ax.get_legend_handles_labels()
        if n_series == 1:
            handles, labels = [], []
        if any_hollow:
            handles.append(_hollow_handle(Line2D))
            labels.append(_invalid_label(summary))
        ax.legend(
            handles,
            labels,
            title=", ".join(headers[k] for k in others) if len(others) == 1 else None,
            fontsize=8,
            title_fontsize=8,
            frameon=False,
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
        )
    _style_axes(ax)
    return fig


def _hollow(ax, points: Sequence[tuple[float, float]], color: Any) -> None:
    """Hollow markers (white inside, ``color`` rim) over whatever is drawn at ``points``."""
    ax.plot(
        [x for x, _ in points],
        [y for _, y in points],
        linestyle="none",
        marker="o",
        markersize=7,
        markerfacecolor="white",
        markeredgecolor=color,
        markeredgewidth=1.6,
        zorder=6,
    )


def _hollow_handle(line2d: Any) -> Any:
    return line2d(
        [],
        [],
        linestyle="none",
        marker="o",
        markersize=7,
        markerfacecolor="white",
        markeredgecolor="0.3",
        markeredgewidth=1.6,
    )


def _invalid_label(summary: pd.DataFrame) -> str:
    left_out = sum(0 if is_missing(v) else int(v) for v in _values(summary, N_LEFT_OUT))
    return f"{INVALID_LABEL} ({'left out of the means' if left_out else 'in the means'})"


def invalid_points(runs: Runs, summary: pd.DataFrame, metric: str) -> list[float | None]:
    """Per summary row, where to draw a hollow marker for invalid energy, or None.

    With the invalid runs left out (the default), the mean of their own values; with them kept
    in (``n_energy_left_out`` 0), the row's mean, which includes them.
    """
    groups = configuration_groups(runs)
    if len(groups) != len(summary) or VALID not in runs.frame.columns:
        return [None] * len(summary)
    frame = runs.frame
    valid = frame[VALID].astype(object).tolist()
    means = _floats(summary, f"{metric}.mean")
    left_out = _values(summary, N_LEFT_OUT)
    invalid = _values(summary, N_INVALID)
    out: list[float | None] = []
    for i, group in enumerate(groups):
        if is_missing(invalid[i]) or not invalid[i]:
            out.append(None)
        elif is_missing(left_out[i]) or not left_out[i]:
            out.append(None if math.isnan(means[i]) else means[i])
        else:
            rows = [
                r
                for r in group.rows
                if str(frame["status"].iloc[r]) == "ok" and judged_invalid(valid[r])
            ]
            values = frame[metric].iloc[rows].astype(object).tolist() if metric in frame else []
            out.append(summarise(values).mean)
    return out


def _min_step(xs: list[float]) -> float:
    xs = sorted(set(xs))
    steps = [b - a for a, b in zip(xs, xs[1:], strict=False) if b > a]
    return min(steps) if steps else 1.0


# --------------------------------------------------------------------------- Pareto


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of points that no other point beats on both: more tokens/s and fewer J/token."""
    front = []
    for i, (t, j) in enumerate(points):
        dominated = any(
            (t2 >= t and j2 <= j) and (t2 > t or j2 < j)
            for k, (t2, j2) in enumerate(points)
            if k != i
        )
        if not dominated:
            front.append(i)
    return front


def pareto_figure(summary: pd.DataFrame, knobs: Sequence[str], hollow: Hollow | None = None) -> Any:
    """Tokens/s against J/token per configuration; the frontier joined up and labelled.

    ``hollow`` (see :func:`invalid_points`) marks invalid energy with hollow markers; a
    configuration whose only J/token is invalid is drawn hollow and takes no part in the front.
    """
    from matplotlib.lines import Line2D

    toks = _floats(summary, f"{TOKS}.mean")
    jtok = _floats(summary, f"{JTOK}.mean")
    usable = [i for i in range(len(summary)) if not (math.isnan(toks[i]) or math.isnan(jtok[i]))]
    if not usable:
        valid = " a valid" if any(v is not None for v in hollow or []) else ""
        raise PlotSkipped(f"no configuration has both tokens/s and{valid} J/token")
    if len(usable) < 2:
        raise PlotSkipped("it needs at least two configurations with tokens/s and J/token")
    headers = knob_headers(knobs)
    pts = [(toks[i], jtok[i]) for i in usable]
    front = [usable[k] for k in pareto_front(pts)]
    t_half = _floats(summary, f"{TOKS}.ci95_half")
    j_half = _floats(summary, f"{JTOK}.ci95_half")

    fig = _new_figure((7.5, 5.2))
    ax = fig.add_subplot()
    others = [i for i in usable if i not in front]
    for group, color, size, z in ((others, "0.6", 30, 2), (front, "tab:blue", 45, 3)):
        if not group:
            continue
        ax.errorbar(
            [toks[i] for i in group],
            [jtok[i] for i in group],
            xerr=[0.0 if math.isnan(t_half[i]) else t_half[i] for i in group],
            yerr=[0.0 if math.isnan(j_half[i]) else j_half[i] for i in group],
            fmt="none",
            ecolor=color,
            elinewidth=0.8,
            alpha=0.45,
            zorder=z - 1,
        )
        ax.scatter(
            [toks[i] for i in group],
            [jtok[i] for i in group],
            s=size,
            color=color,
            zorder=z,
            label="Pareto front" if group is front else "dominated",
        )
    front_sorted = sorted(front, key=lambda i: toks[i])
    ax.plot(
        [toks[i] for i in front_sorted],
        [jtok[i] for i in front_sorted],
        color="tab:blue",
        linewidth=1.2,
        alpha=0.8,
        zorder=2,
    )
    marks = {
        i: float(v) for i, v in enumerate(hollow or []) if v is not None and not math.isnan(toks[i])
    }
    flagged = list(marks)
    for i, y in marks.items():
        color = "tab:blue" if i in front else "0.6" if i in usable else "0.45"
        _hollow(ax, [(toks[i], y)], color)
    shown = usable + [i for i in flagged if i not in usable]
    ys = {i: jtok[i] if i in usable else marks[i] for i in shown}

    span_x = max(toks[i] for i in shown) / max(min(toks[i] for i in shown), 1e-12)
    span_y = max(ys.values()) / max(min(ys.values()), 1e-12)
    if span_x >= 10:
        ax.set_xscale("log")
        _plain_log_ticks(ax.xaxis)
    if span_y >= 10:
        ax.set_yscale("log")
        _plain_log_ticks(ax.yaxis)
    ax.margins(x=0.12, y=0.12)
    ax.set_xlabel(METRIC_LABELS[TOKS][0] + "  →  faster")
    ax.set_ylabel(METRIC_LABELS[JTOK][0] + "  ↓  cheaper")
    _titles(
        fig,
        ax,
        "Pareto front: throughput vs energy per token",
        "mean of ok repeats; better is bottom right; front points labelled"
        + ("; hollow: invalid energy" if flagged else ""),
    )
    handles, texts = ax.get_legend_handles_labels()
    if flagged:
        handles.append(_hollow_handle(Line2D))
        texts.append(_invalid_label(summary))
    ax.legend(handles, texts, fontsize=8, frameon=False, loc="upper right")
    _style_axes(ax)

    def describe(i: int, sep: str) -> str:
        parts = [f"{headers[k]}={_label_value(_values(summary, k)[i])}" for k in knobs]
        return sep.join(_clip(p) for p in parts) if parts else "this run"

    labels = [(i, describe(i, "\n"), True) for i in sorted(front, key=lambda i: toks[i])]
    if len(shown) <= 10:  # few points: name the dominated and invalid ones too, quietly
        labels += [(i, describe(i, ", "), False) for i in shown if i not in front]
    _place_labels(fig, ax, [(toks[i], ys[i], text, strong) for i, text, strong in labels])
    return fig


def _place_labels(fig, ax, labels: Sequence[tuple[float, float, str, bool]]) -> None:
    """Annotate points, trying offsets around each until the label overlaps no other label,
    no marker and stays inside the axes. The layout is frozen first so nothing moves after."""
    fig.canvas.draw()
    fig.set_layout_engine("none")
    renderer = fig.canvas.get_renderer()
    axes_box = ax.get_window_extent(renderer)
    markers = [ax.transData.transform((x, y)) for x, y, _, _ in labels]
    taken: list = []
    candidates = [
        (8, 6),
        (8, -6),
        (-8, 6),
        (-8, -6),
        (8, 22),
        (8, -22),
        (-8, 22),
        (-8, -22),
        (20, 36),
        (20, -36),
        (-20, 36),
        (-20, -36),
    ]
    for x, y, text, strong in labels:
        first, chosen = None, None
        for dx, dy in candidates:
            ann = ax.annotate(
                text,
                (x, y),
                xytext=(dx, dy),
                textcoords="offset points",
                fontsize=8 if strong else 7,
                color="black" if strong else "0.45",
                ha="left" if dx > 0 else "right",
                va="bottom" if dy > 0 else "top",
                bbox={
                    "boxstyle": "round,pad=0.2",
                    "fc": "white",
                    "ec": "0.75" if strong else "none",
                    "alpha": 0.85,
                },
                arrowprops=None if abs(dy) < 20 else {"arrowstyle": "-", "color": "0.6", "lw": 0.6},
                zorder=5 if strong else 4,
            )
            box = ann.get_window_extent(renderer).padded(2)
            inside = (
                box.x0 >= axes_box.x0
                and box.x1 <= axes_box.x1
                and box.y0 >= axes_box.y0
                and box.y1 <= axes_box.y1
            )
            clear = not any(box.overlaps(t) for t in taken) and not any(
                box.contains(mx, my) for mx, my in markers
            )
            if inside and clear:
                chosen = ann
                break
            if first is None:
                first = ann  # kept if no offset fits
            else:
                ann.remove()
        if chosen is None and not strong and first is not None:
            first.remove()  # an optional label with no room is left out rather than overlap
            first = None
        if chosen is None:
            chosen = first
        elif first is not None:
            first.remove()
        if chosen is not None:
            taken.append(chosen.get_window_extent(renderer))


# --------------------------------------------------------------------------- timeline


def timeline_figure(run_dir: Path, row: dict[str, Any]) -> Any:
    """Power and temperature against time for one run, one line per device."""
    ts_file = Path(run_dir) / "timeseries.csv"
    if not ts_file.is_file():
        raise PlotSkipped(f"{ts_file} does not exist")
    try:
        ts = pd.read_csv(ts_file)
    except (OSError, ValueError) as exc:
        raise PlotSkipped(f"cannot read {ts_file}: {exc}") from exc
    if ts.empty or "time_s" not in ts.columns:
        raise PlotSkipped(f"{ts_file} has no samples")
    panels = [
        (c, label)
        for c, label in (("power_w", "power (W)"), ("temperature_c", "temperature (°C)"))
        if c in ts.columns and pd.to_numeric(ts[c], errors="coerce").notna().any()
    ]
    if not panels:
        raise PlotSkipped(f"{ts_file} has no power or temperature samples")

    fig = _new_figure((8.0, 2.6 + 2.0 * len(panels)))
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    groups = list(ts.groupby("device", sort=True)) if "device" in ts.columns else [("", ts)]
    t = pd.to_numeric(ts["time_s"], errors="coerce")
    t0 = float(t.min()) if t.notna().any() else 0.0
    for ax, (column, label) in zip(axes, panels, strict=True):
        for device, part in groups:
            ax.plot(
                pd.to_numeric(part["time_s"], errors="coerce") - t0,
                pd.to_numeric(part[column], errors="coerce"),
                linewidth=1.3,
                label=f"device {device}" if len(groups) > 1 else None,
            )
        if column == "power_w":
            for key, style, text in (
                ("energy.idle_power_w", "--", "idle"),
                ("energy.avg_power_w", ":", "average in window"),
            ):
                value = row.get(key)
                if isinstance(value, (int, float)) and not is_missing(value):
                    ax.axhline(
                        float(value),
                        linestyle=style,
                        color="0.35",
                        linewidth=1.0,
                        label=f"{text} {format_number(value)} W",
                    )
            ax.set_ylim(bottom=0)
        ax.set_ylabel(label)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        _style_axes(ax)
    axes[-1].set_xlabel("time since first sample (s)")
    model = row.get("model")
    what = f" — {model}" if isinstance(model, str) and model else ""
    _titles(
        fig,
        axes[0],
        f"Power and temperature{what}",
        f"{'/'.join(ts_file.parent.parts[-2:])}: {len(ts)} samples from timeseries.csv"
        + (
            "; energy judged invalid (see validity.problems)"
            if judged_invalid(row.get(VALID))
            else ""
        ),
    )
    return fig


# --------------------------------------------------------------------------- all of them


def clear_old_plots(plot_dir: Path) -> None:
    """Remove plots an earlier report wrote here, so none is left over from other knobs."""
    if not plot_dir.is_dir():
        return
    for pattern in OWN_PATTERNS:
        for old in plot_dir.glob(pattern):
            old.unlink()


def energy_unavailable_reason(runs: Runs) -> str:
    reasons = [
        str(v) for v in _values(runs.frame, "energy.unavailable_reason") if not is_missing(v) and v
    ]
    if reasons:
        return max(set(reasons), key=reasons.count)
    return "no run has energy figures"


def with_hardware(runs: Runs, summary: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The knobs that split lines, and the summary to plot: when the runs ran on different
    hardware, the GPU (short label) splits lines too, so no line joins two GPUs' figures."""
    series = list(runs.knobs)
    if GPU not in summary.columns:
        return summary, series
    summary = summary.copy()
    summary[GPU] = [gpu_short(str(v)) for v in _values(summary, GPU)]
    return summary, [*series, GPU]


def draw_all(runs: Runs, summary: pd.DataFrame, plot_dir: Path) -> tuple[list[Path], list[str]]:
    """Draw every plot that applies; return (files written, reasons for plots skipped)."""
    plot_dir.mkdir(parents=True, exist_ok=True)
    clear_old_plots(plot_dir)
    written: list[Path] = []
    skipped: list[str] = []
    hollow = invalid_points(runs, summary, JTOK)
    has_energy = any(not math.isnan(v) for v in _floats(summary, f"{JTOK}.mean")) or any(
        v is not None for v in hollow
    )
    no_energy = f"energy is unavailable in every run ({energy_unavailable_reason(runs)})"
    summary, series = with_hardware(runs, summary)

    def attempt(path: Path, make: Callable[[], Any]) -> None:
        try:
            fig = make()
        except PlotSkipped as exc:
            skipped.append(f"{path.name} skipped: {exc}")
            return
        fig.savefig(path)
        written.append(path)

    for knob in runs.knobs:
        name = _safe_name(knob)
        attempt(
            plot_dir / f"tokens_per_s_vs_{name}.png",
            partial(knob_figure, summary, series, knob, TOKS),
        )
        if has_energy:
            attempt(
                plot_dir / f"j_per_token_vs_{name}.png",
                partial(knob_figure, summary, series, knob, JTOK, hollow),
            )
    if runs.knobs and not has_energy:
        skipped.append(f"J/token plots skipped: {no_energy}")
    if len(summary) < 2:
        pass  # a Pareto front compares configurations; with one there is nothing to say
    elif not has_energy:
        skipped.append(f"pareto.png skipped: it needs J/token and {no_energy}")
    else:
        attempt(plot_dir / "pareto.png", lambda: pareto_figure(summary, series, hollow))
    if runs.n_runs == 1:
        row = dict(zip(runs.frame.columns, runs.frame.astype(object).iloc[0].tolist(), strict=True))
        attempt(plot_dir / "timeline.png", lambda: timeline_figure(Path(row["run_dir"]), row))
    return written, skipped
