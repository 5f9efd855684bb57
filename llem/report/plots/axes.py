"""Which knobs get a plot of their own (``<figure>_vs_<knob>.png``).

Every knob does, but a measurement setting (``measurement.*``: the energy source, a replayed
trace, the sampling) that differs only between the sweeps a report merges, constant within each,
says how each sweep measured, not what it measured: a plot against it ("throughput vs
replay_trace") compares two ways of measuring as if they were a knob. Such keys still split the
table's rows and the plots' series; they get no x axis, and the report says so. A measurement
setting swept within one sweep (a methodology study) keeps its plots.
"""

from __future__ import annotations

from pathlib import Path

from llem.report.load import Runs

#: the configuration section of how a run is measured
SETTING_PREFIX = "measurement."


def _root_of(run_dir: str, roots: list[Path]) -> str:
    path = Path(run_dir)
    for root in roots:
        if path.is_relative_to(root):
            return str(root)
    return str(path.parent)


def _swept_within_one_sweep(runs: Runs, key: str) -> bool:
    """Whether ``key`` takes two values inside one of the report's directories."""
    frame = runs.frame
    seen: dict[str, set[str]] = {}
    for run_dir, value in zip(frame["run_dir"].astype(str), frame[key].astype(object), strict=True):
        seen.setdefault(_root_of(run_dir, runs.roots), set()).add(repr(value))
    return any(len(values) > 1 for values in seen.values())


def plot_axes(runs: Runs) -> tuple[list[str], list[str]]:
    """(the knobs plotted against, the measurement settings left without a plot)."""
    kept, left = [], []
    for key in runs.knobs:
        if key.startswith(SETTING_PREFIX) and not _swept_within_one_sweep(runs, key):
            left.append(key)
        else:
            kept.append(key)
    return kept, left


def left_out_line(left: list[str]) -> str:
    """The report's line on the settings left without a plot."""
    return (
        f"no plot against {', '.join(left)}: a measurement setting that differs only between "
        "the merged sweeps (how each measured), not a knob; it still splits the rows and lines"
    )
