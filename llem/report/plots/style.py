"""The look every plot shares, drawn on matplotlib's Agg canvas (never pyplot).

matplotlib is imported inside the functions, so importing the plots costs nothing until one is
drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

FIGSIZE = (7.5, 4.6)
DPI = 120
#: hollow (invalid energy) markers, in points
HOLLOW_SIZE = 7


def new_figure(figsize: tuple[float, float] = FIGSIZE) -> Any:
    """A Figure on its own Agg canvas, with constrained layout."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


#: room a figure keeps beside and above its legend: the axes' least width, the titles' height
MIN_AXES_WIDTH_IN = 4.0
TITLES_HEIGHT_IN = 1.0


def fit_to_legends(fig: Any) -> None:
    """Make ``fig`` large enough for its axes' legends (many series, labels of several lines):
    a legend beside the axes is never cut at the figure's edge, and constrained layout never
    collapses the axes to make room for it."""
    renderer = fig.canvas.get_renderer()
    width, height = fig.get_size_inches()
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None:
            continue
        box = legend.get_window_extent(renderer)
        width = max(width, box.width / fig.dpi + MIN_AXES_WIDTH_IN)
        height = max(height, box.height / fig.dpi + TITLES_HEIGHT_IN)
    if (width, height) != tuple(fig.get_size_inches()):
        fig.set_size_inches(width, height)


def save(fig: Any, path: Path | None) -> Any:
    """Write ``fig`` as a PNG to ``path`` (nothing when None), grown to fit its legends
    (:func:`fit_to_legends`); returns the figure."""
    fit_to_legends(fig)
    if path is not None:
        fig.savefig(path)
    return fig


def titles(fig: Any, ax: Any, title: str, note: str) -> None:
    """A bold-ish title with a small grey note under it, both left-aligned."""
    fig.suptitle(title, x=0.01, ha="left", fontsize=12)
    ax.set_title(note, loc="left", fontsize=8, color="0.4")


def plain_log_ticks(axis: Any) -> None:
    """Log axis ticks at 1-2-5 steps labelled 20, 50, 100 (not 2×10¹)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def side_legend(ax: Any, *handles_labels: Any, title: str | None = None) -> None:
    """The legend beside the axes, top left of the space right of them (every plot's legend)."""
    ax.legend(
        *handles_labels,
        title=title,
        fontsize=8,
        title_fontsize=8,
        frameon=False,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
    )


def style_axes(ax: Any) -> None:
    ax.grid(True, alpha=0.3, linewidth=0.6)
    ax.spines["top"].set_visible(False)
    ax.spines["right"].set_visible(False)


def draw_hollow(ax: Any, points: Sequence[tuple[float, float]], color: Any) -> None:
    """Hollow markers (white inside, ``color`` rim) over whatever is drawn at ``points``."""
    ax.plot(
        [x for x, _ in points],
        [y for _, y in points],
        linestyle="none",
        marker="o",
        markersize=HOLLOW_SIZE,
        markerfacecolor="white",
        markeredgecolor=color,
        markeredgewidth=1.6,
        zorder=6,
    )


def hollow_handle() -> Any:
    """The legend entry for hollow markers."""
    from matplotlib.lines import Line2D

    return Line2D(
        [],
        [],
        linestyle="none",
        marker="o",
        markersize=HOLLOW_SIZE,
        markerfacecolor="white",
        markeredgecolor="0.3",
        markeredgewidth=1.6,
    )


#: x marks at the bottom of the axes for configurations without an ok run, in points
FAILED_SIZE = 8


def draw_failed(ax: Any, xs: Sequence[float], color: Any) -> None:
    """An x at the bottom of the axes (data x, axes y) for each configuration at ``xs`` that has
    no figure because no run of it was ok."""
    from matplotlib.transforms import blended_transform_factory

    ax.plot(
        list(xs),
        [0.03] * len(xs),
        transform=blended_transform_factory(ax.transData, ax.transAxes),
        linestyle="none",
        marker="x",
        markersize=FAILED_SIZE,
        markeredgewidth=2.0,
        color=color,
        clip_on=False,
        zorder=6,
    )


def failed_handle() -> Any:
    """The legend entry for the x marks."""
    from matplotlib.lines import Line2D

    return Line2D(
        [],
        [],
        linestyle="none",
        marker="x",
        markersize=FAILED_SIZE,
        markeredgewidth=2.0,
        color="0.3",
    )
