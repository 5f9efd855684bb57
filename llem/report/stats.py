"""summary.csv's rows: the runs of each configuration and hardware pooled, every figure summarised
over the configuration's repeats (mean, standard deviation, 95% CI over the repeats and, beside it,
the runs' own bound: ``llem.report.repeat_stats``), with the counts of what the energy statistics
left out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from llem.report.cells import is_missing, typed_column
from llem.report.footprint_metrics import FOOTPRINT_METRICS, LAYER_LABEL
from llem.report.hardware import (
    Group,
    configuration_groups,
    device_column,
    hardware_varies,
    varying_details,
    with_hardware,
)
from llem.report.load import Runs
from llem.report.repeat_stats import summarise
from llem.report.summary_metrics import (
    METRICS,
    QUALITY_METRICS,
    SERVING_METRICS,
    SPECULATIVE_METRICS,
    TRAFFIC_FIELDS,
)
from llem.report.ttft_origin import ORIGIN
from llem.report.window import (
    HEADLINES,
    RULE,
    STEADY,
    STEADY_MARK,
    STEADY_RULE,
    WINDOW,
    has_steady_state,
    source,
    window_of,
)
from llem.result.figure import UNCERTAINTY_SUFFIX

# --------------------------------------------------------------------------- per configuration

STAT_SUFFIXES = ("n", "mean", "std", "ci95_half", "ci95_low", "ci95_high")
#: a metric ``m`` with per-run bounds in ``m_uncertainty`` also gets ``m.bound_mean``
BOUND_SUFFIX = "bound_mean"
#: a metric ``m`` with per-run 95% intervals in ``m_ci95_half_width`` (the fitted step model's
#: figures) also gets ``m.fit_ci95_half``: the 95% half-width of the runs' mean from each run's
#: own, the runs taken as independent (the root of the sum of their squares over their number);
#: None where a run with the figure has no interval
FIT_CI_SUFFIX = "fit_ci95_half"
INTERVAL_SUFFIX = "_ci95_half_width"
#: the results.csv column with each run's energy verdict (validity.energy_valid)
VALID = "valid"
#: the summary.csv columns that say what the energy statistics left out
N_INVALID = "n_energy_invalid"
N_LEFT_OUT = "n_energy_left_out"
#: the summary.csv column with how many runs every statistic of the row comes from
N_USED = "n_used"
#: summary.csv: every run of the row ran static batches, where no steady state is judged
#: (``llem.figures.steady_state``: the validity check ``steady_state`` is "not checked")
STATIC = "static_batches"
STEADY_CHECK = "validity.checks.steady_state"
NOT_JUDGED = "not checked"


def judged_invalid(verdict: object) -> bool:
    """A ``valid`` cell that says false (not one that is empty: not judged)."""
    if verdict is None or verdict is pd.NA:
        return False
    return isinstance(verdict, (bool, np.bool_)) and not verdict


def status_label(statuses: Sequence[str]) -> str:
    """``["ok", "ok", "failed"]`` → ``"ok ×2, failed ×1"``; a single run → just its status."""
    counts: dict[str, int] = {}
    for s in statuses:
        counts[s] = counts.get(s, 0) + 1
    order = ["ok", "failed", "skipped", "missing"]
    keys = sorted(counts, key=lambda s: (order.index(s) if s in order else len(order), s))
    if len(statuses) == 1:
        return keys[0]
    return ", ".join(f"{k} ×{counts[k]}" for k in keys)


# --------------------------------------------------------------------------- the summary


def summary_frame(runs: Runs, include_invalid: bool = False) -> pd.DataFrame:
    """One row per configuration and hardware (:func:`configuration_groups`).

    Columns: ``config_hash``, every override column except ``repeat`` and the run-order
    settings (``sweep.*``: runs that differ only in those are pooled); when the hardware differs
    between runs (``llem.report.hardware``), the device column, ``hardware.gpu_model``,
    ``hardware.gpu_count``, the details in which rows of the same device differ (host and CPU
    model, GPU power limit, driver) and ``gpu`` (a label, e.g. ``NVIDIA A100-SXM4-80GB ×2``,
    ``cpu · on node-2``); then ``n`` (ok runs), ``n_runs``,
    ``status`` (e.g. ``ok ×3`` or ``ok ×2, failed ×1``), ``n_energy_invalid`` (ok runs whose
    energy was judged invalid), ``n_energy_left_out`` (of those, left out of the row's
    statistics: all of them unless ``include_invalid``), ``n_used`` (the runs every statistic of
    the row comes from: ``n - n_energy_left_out``), ``run_dirs``, then for each metric in
    :data:`METRICS` present in the results: ``<metric>.n`` (runs with a value), ``.mean``,
    ``.std``, ``.ci95_half``, ``.ci95_low``, ``.ci95_high`` (empty with fewer than 2 runs), and
    for a metric with per-run bounds ``.bound_mean`` (the runs' mean instrument bound, never part
    of the CI). Every statistic of a row uses the same runs (so its figures agree with each
    other: a run left out of J/token is left out of tokens/s too): ok runs whose energy was not
    judged invalid (``valid`` false), or all ok runs with ``include_invalid``; empty cells where
    there is nothing to compute.

    Serving runs (result schema 3) add: after the knobs, the traffic the configuration served
    (:data:`TRAFFIC_FIELDS` some run recorded, unless they are knobs) and ``latency.ttft_origin``
    (what TTFT is measured from; runs with different origins are different rows); the statistics of
    :data:`SERVING_METRICS` some run has; and where some run has a steady state, ``window``,
    ``window.rule`` and the headline statistics ``headline.<figure>.<stat>``
    (``llem.report.window``). Scored runs (result schema 6) add the statistics of the quality
    figures some run has (``QUALITY_METRICS``: ``quality.value``,
    its interval's ends, ``quality.j_per_correct_answer`` with its ``bound_mean``, ...).
    """
    columns = _Columns(runs.frame)
    groups = configuration_groups(runs)
    show_hardware = hardware_varies(groups)
    details = varying_details([g.hardware for g in groups])
    keys = runs.config_keys
    traffic = [k for k in columns.traffic if k not in keys]
    origin = [ORIGIN] if columns.present(ORIGIN) else []  # part of what pools (report.ttft)
    origin += [LAYER_LABEL] if columns.present(LAYER_LABEL) else []  # measured | modelled
    rows = []
    for group in groups:
        row, used = _group_row(columns, group, [*keys, *traffic, *origin], include_invalid)
        if show_hardware:
            row = with_hardware(row, group, device_column(runs.frame), details)
        for m in columns.metrics:  # every figure of the row from the same runs
            row.update(_metric_stats(columns, m, used))
        if columns.steady:
            row.update(_headline_stats(columns, used))
        rows.append(row)
    return _typed(rows, columns, show_hardware)


class _Columns:
    """The results.csv columns a summary reads, each taken out of the frame once as a list."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame
        self._lists: dict[str, list[Any]] = {}
        self.metrics = [m for m in METRICS if m in frame.columns]
        self.metrics += [m for m in SERVING_METRICS if self.present(m)]
        self.metrics += [m for m in QUALITY_METRICS if self.present(m)]  # schema 6
        self.metrics += [m for m in FOOTPRINT_METRICS if self.present(m)]  # docs/footprint.md
        self.metrics += [m for m in SPECULATIVE_METRICS if self.present(m)]
        #: metrics with per-run bounds in ``<metric>_uncertainty``
        self.bounded = {m for m in self.metrics if f"{m}{UNCERTAINTY_SUFFIX}" in frame.columns}
        #: metrics with per-run 95% intervals in ``<metric>_ci95_half_width``
        self.intervalled = {m for m in self.metrics if self.present(f"{m}{INTERVAL_SUFFIX}")}
        #: the traffic columns some run has (the summary's traffic identity)
        self.traffic = [k for k in TRAFFIC_FIELDS if self.present(k)]
        #: some run has a steady state: each row gets a window and headline figures
        self.steady = has_steady_state(frame)
        self.headlines = [
            w for w in HEADLINES if w in self.metrics or HEADLINES[w][1] in self.metrics
        ]

    def present(self, name: str) -> bool:
        """Some run has a value in column ``name``."""
        return any(not is_missing(v) for v in self.column(name))

    def column(self, name: str) -> list[Any]:
        if name not in self._lists:
            self._lists[name] = _list(self.frame, name)
        return self._lists[name]

    def values(self, name: str, rows: Sequence[int]) -> list[Any]:
        cells = self.column(name)
        return [cells[i] for i in rows]


def _list(frame: pd.DataFrame, column: str) -> list[Any]:
    if column not in frame.columns:
        return [None] * len(frame)
    return frame[column].astype(object).tolist()


def _group_row(
    columns: _Columns, group: Group, keys: Sequence[str], include_invalid: bool
) -> tuple[dict[str, Any], list[int]]:
    """A group's identity and counts, and the rows every one of its statistics uses: its ok
    runs, less those whose energy was judged invalid unless ``include_invalid``."""
    status = [str(s) for s in columns.values("status", group.rows)]
    ok = [i for i, s in zip(group.rows, status, strict=True) if s == "ok"]
    invalid = [i for i in ok if judged_invalid(columns.column(VALID)[i])]
    row: dict[str, Any] = {"config_hash": group.config_hash}
    for k in keys:
        row[k] = _first(columns.values(k, group.rows))
    row["n"] = len(ok)
    row["n_runs"] = len(group.rows)
    row["status"] = status_label(status)
    row[N_INVALID] = len(invalid)
    row[N_LEFT_OUT] = 0 if include_invalid else len(invalid)
    used = ok if include_invalid else [i for i in ok if i not in invalid]
    row[N_USED] = len(used)
    row["run_dirs"] = "; ".join(str(v) for v in columns.values("run_dir", group.rows))
    if columns.present(STEADY_CHECK):  # serving sections: did the runs run static batches?
        checks = columns.values(STEADY_CHECK, used)
        row[STATIC] = bool(checks) and all(c == NOT_JUDGED for c in checks)
    return row, used


def _metric_stats(columns: _Columns, metric: str, used: list[int]) -> dict[str, Any]:
    """The statistics of ``metric`` over the runs in rows ``used``."""
    bounded = metric in columns.bounded
    bounds = columns.values(f"{metric}{UNCERTAINTY_SUFFIX}", used) if bounded else None
    s = summarise(columns.values(metric, used), bounds=bounds)
    out = {
        f"{metric}.n": s.n,
        f"{metric}.mean": s.mean,
        f"{metric}.std": s.std,
        f"{metric}.ci95_half": s.ci_half,
        f"{metric}.ci95_low": s.ci_low,
        f"{metric}.ci95_high": s.ci_high,
    }
    if bounded:
        out[f"{metric}.{BOUND_SUFFIX}"] = s.bound
    if metric in columns.intervalled:
        out[f"{metric}.{FIT_CI_SUFFIX}"] = _mean_interval(
            columns.values(metric, used), columns.values(f"{metric}{INTERVAL_SUFFIX}", used)
        )
    return out


def _mean_interval(values: Sequence[Any], halves: Sequence[Any]) -> float | None:
    """The 95% half-width of the mean of the runs' ``values`` from each run's own (``halves``),
    the runs independent; None where a run with a value has no interval, or none has a value."""
    pairs = [(v, h) for v, h in zip(values, halves, strict=True) if not is_missing(v)]
    if not pairs or any(is_missing(h) for _, h in pairs):
        return None
    return math.sqrt(sum(float(h) ** 2 for _, h in pairs)) / len(pairs)


def _headline_stats(columns: _Columns, used: list[int]) -> dict[str, Any]:
    """The row's window (see ``llem.report.window``) and its headline figures' statistics, each
    from that one window over the same runs."""
    window = window_of(columns.values(STEADY_MARK, used))
    rules = [r for r in columns.values(STEADY_RULE, used) if not is_missing(r)]
    out: dict[str, Any] = {WINDOW: window, RULE: rules[0] if window == STEADY and rules else None}
    for whole in columns.headlines:
        name, chosen = HEADLINES[whole][0], source(whole, window)
        stats = _metric_stats(columns, chosen, used) if chosen in columns.metrics else {}
        for suffix in (*STAT_SUFFIXES, BOUND_SUFFIX):
            out[f"{name}.{suffix}"] = stats.get(f"{chosen}.{suffix}")
        out[f"{name}.n"] = out[f"{name}.n"] or 0
    return out


def _typed(rows: list[dict[str, Any]], columns: _Columns, show_hardware: bool) -> pd.DataFrame:
    names = list(rows[0].keys()) if rows else ["config_hash"]
    out = {c: typed_column([r.get(c) for r in rows]) for c in names}
    floats = [(m, m in columns.bounded) for m in columns.metrics]
    floats += [(HEADLINES[w][0], True) for w in columns.headlines if columns.steady]
    for m, bounded in floats:  # statistics are floats even when every value happens to be whole
        bound = [BOUND_SUFFIX] if bounded else []
        bound += [FIT_CI_SUFFIX] if m in columns.intervalled else []
        for suffix in [*STAT_SUFFIXES[1:], *bound]:
            if f"{m}.{suffix}" in out:
                out[f"{m}.{suffix}"] = out[f"{m}.{suffix}"].astype("float64")
    if show_hardware:
        out["hardware.gpu_count"] = out["hardware.gpu_count"].astype("Int64")
    return pd.DataFrame(out)


def _first(values: list[Any]) -> Any:
    for v in values:
        if not is_missing(v):
            return v
    return None
