"""Labels of ``pareto.png``: each placed at the first offset around its marker where it overlaps
no other label and no marker and stays inside the axes (a front label with no room keeps its first
offset; an optional one is left out)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ParetoLabel:
    x: float
    y: float
    text: str
    strong: bool  # a front point (black, boxed); else a quiet grey one, left out if it has no room


#: offsets (points) tried around a marker, nearest first
OFFSETS = (
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
)


def _annotate(ax: Any, label: ParetoLabel, dx: int, dy: int) -> Any:
    return ax.annotate(
        label.text,
        (label.x, label.y),
        xytext=(dx, dy),
        textcoords="offset points",
        fontsize=8 if label.strong else 7,
        color="black" if label.strong else "0.45",
        ha="left" if dx > 0 else "right",
        va="bottom" if dy > 0 else "top",
        bbox={
            "boxstyle": "round,pad=0.2",
            "fc": "white",
            "ec": "0.75" if label.strong else "none",
            "alpha": 0.85,
        },
        arrowprops=None if abs(dy) < 20 else {"arrowstyle": "-", "color": "0.6", "lw": 0.6},
        zorder=5 if label.strong else 4,
    )


def _fits(box: Any, axes_box: Any, taken: Sequence[Any], markers: Sequence[Any]) -> bool:
    """Inside the axes, over no label placed before and no marker."""
    inside = (
        box.x0 >= axes_box.x0
        and box.x1 <= axes_box.x1
        and box.y0 >= axes_box.y0
        and box.y1 <= axes_box.y1
    )
    return (
        inside
        and not any(box.overlaps(t) for t in taken)
        and not any(box.contains(mx, my) for mx, my in markers)
    )


def _place_one(ax: Any, label: ParetoLabel, fits: Any, renderer: Any) -> Any:
    """The first offset where the label fits; else, for a front label, the first offset tried;
    an optional label with no room is left out (None) rather than overlap."""
    first = None
    for dx, dy in OFFSETS:
        ann = _annotate(ax, label, dx, dy)
        if fits(_text_box(ann, renderer)):
            if first is not None:
                first.remove()
            return ann
        if first is None:
            first = ann  # kept if no offset fits
        else:
            ann.remove()
    if first is not None and not label.strong:
        first.remove()
        return None
    return first


def _text_box(ann: Any, renderer: Any) -> Any:
    """The label's own box, padded: without its leader line, which always reaches its marker."""
    from matplotlib.text import Text

    ann.update_positions(renderer)
    return Text.get_window_extent(ann, renderer).padded(2)


def place_labels(fig: Any, ax: Any, labels: Sequence[ParetoLabel]) -> None:
    """Annotate points, trying offsets around each until the label overlaps no other label,
    no marker and stays inside the axes. The layout is frozen first so nothing moves after."""
    fig.draw_without_rendering()  # lays the figure out; rasterising it here would be wasted
    fig.set_layout_engine("none")
    renderer = fig.canvas.get_renderer()
    axes_box = ax.get_window_extent(renderer)
    markers = [ax.transData.transform((label.x, label.y)) for label in labels]
    taken: list[Any] = []
    for label in labels:
        chosen = _place_one(ax, label, lambda box: _fits(box, axes_box, taken, markers), renderer)
        if chosen is not None:
            taken.append(_text_box(chosen, renderer))
