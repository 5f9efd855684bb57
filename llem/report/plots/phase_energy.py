"""``phase_energy.png``: prefill J per prompt token and decode J per token by difference (95%
interval over the repeats) beside the fitted split's (± its 95% interval), one pair of bars per
configuration and N, a panel per phase (``llem.report.phase_difference``).

:func:`prepare_phase_energy` turns the comparisons into a :class:`PhaseEnergyPlot` (raising
``PlotSkipped`` with the reason where no figure of either method can be drawn);
:func:`draw_phase_energy` draws it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llem.report.phase_difference import Estimate, PhaseComparison
from llem.report.plots.common import PlotSkipped
from llem.report.plots.style import new_figure, save, side_legend, style_axes, titles

PHASE_PLOT = "phase_energy.png"
METHODS = ("by difference (95% CI)", "fitted split (95% CI)")


@dataclass(frozen=True)
class PhasePanel:
    ylabel: str
    # per method, per configuration: (value, half-width), None where the figure is null
    points: tuple[tuple[tuple[float, float] | None, ...], ...]


@dataclass(frozen=True)
class PhaseEnergyPlot:
    title: str
    note: str
    labels: tuple[str, ...]  # one per configuration and N
    panels: tuple[PhasePanel, ...]


def _point(est: Estimate) -> tuple[float, float] | None:
    if est.value is None or est.half_width is None:
        return None
    return est.value, est.half_width


def prepare_phase_energy(rows: Sequence[PhaseComparison]) -> PhaseEnergyPlot:
    """The two methods side by side; ``PlotSkipped`` where every figure is null."""
    panels = (
        PhasePanel(
            "prefill J per prompt token",
            (
                tuple(_point(r.prefill) for r in rows),
                tuple(_point(r.fitted_prefill) for r in rows),
            ),
        ),
        PhasePanel(
            "decode J per token",
            (tuple(_point(r.decode) for r in rows), tuple(_point(r.fitted_decode) for r in rows)),
        ),
    )
    if not any(p for panel in panels for method in panel.points for p in method):
        reasons = [e.null_reason for r in rows for e in (r.decode, r.prefill) if e.null_reason]
        raise PlotSkipped(reasons[0] if reasons else "no figure of either method")
    return PhaseEnergyPlot(
        title="Phase energy: by difference and by the fitted split",
        note="the same prompts with 1 new token and with N; the intervals overlap where they agree",
        labels=tuple(f"{r.label} · N={r.new_tokens}" for r in rows),
        panels=panels,
    )


def draw_phase_energy(plot: PhaseEnergyPlot, path: Path | None = None) -> Any:
    """Draw ``plot`` on a new Agg figure (to ``path`` as a PNG, when given); return it."""
    fig = new_figure()
    axes = [fig.add_subplot(1, len(plot.panels), i + 1) for i in range(len(plot.panels))]
    xs = range(len(plot.labels))
    for ax, panel in zip(axes, plot.panels, strict=True):
        for m, (method, points) in enumerate(zip(METHODS, panel.points, strict=True)):
            shown = [(x + 0.15 * (2 * m - 1), p) for x, p in zip(xs, points, strict=True) if p]
            ax.errorbar(
                [x for x, _ in shown],
                [p[0] for _, p in shown],
                yerr=[p[1] for _, p in shown],
                fmt="os"[m],
                capsize=3,
                label=method,
            )
        ax.set_xticks(list(xs), list(plot.labels), rotation=20, ha="right", fontsize=8)
        ax.set_xlim(-0.6, len(plot.labels) - 0.4)
        ax.set_ylim(bottom=0)
        ax.set_ylabel(panel.ylabel)
        style_axes(ax)
    titles(fig, axes[0], plot.title, plot.note)
    side_legend(axes[-1])
    return save(fig, path)
