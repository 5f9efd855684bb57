"""Which window the report's headline figures come from: the steady state, or the whole window.

A run of schema 3 may have a ``steady_state`` section (``llem.figures.steady_state``: ML.ENERGY v3's
rule for offline and closed-loop traffic, warm-up/cool-down edges for open loop). The report's
tokens/s, J/token and mean concurrency (its *headline* figures: the table, the plots) come from the
steady state where it exists and from the whole measured window otherwise.

One configuration never mixes windows in one mean: its headline figures come from the steady state
only when every run its statistics use has one; when some repeats have none (too short, too few
requests, too little concurrency), all of them use the whole window. summary.csv says which, per
configuration, in ``window`` (``steady state`` | ``whole window``) and ``window.rule`` (the steady
state's rule: ``mlenergy_v3`` or ``open_loop``); the headline statistics are
``headline.<figure>.<stat>`` beside the whole window's and the steady state's own.

Where no run has a steady state (results older than schema 3, runs too short for one), none of
these columns exists and the report is what it was before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from llem.report.cells import is_missing

TOKS = "throughput.output_tokens_per_s"
JTOK = "energy.j_per_output_token"
CONC = "concurrency.running_mean"  # the running batch (llem.figures.serving)

STEADY = "steady state"
WHOLE = "whole window"
#: summary.csv columns: a configuration's window, and the steady state's rule where it is used
WINDOW = "window"
RULE = "window.rule"
#: the results.csv column that is set exactly when a run has a steady state
STEADY_MARK = "steady_state.window_s"
STEADY_RULE = "steady_state.rule"

#: whole-window figure -> (its headline name, the steady state's figure)
HEADLINES = {
    TOKS: ("headline.output_tokens_per_s", "steady_state.output_tokens_per_s"),
    JTOK: ("headline.j_per_output_token", "steady_state.j_per_output_token"),
    CONC: ("headline.concurrency_mean", "steady_state.mean_running"),
}
#: how a note names a steady state's rule
RULE_NAMES = {
    "mlenergy_v3": "ML.ENERGY v3 rule",
    "open_loop": "after the warm-up requests, before the cool-down ones",
}


def has_steady_state(frame: pd.DataFrame) -> bool:
    """Some run has a steady state: the report then says which window each figure comes from."""
    if STEADY_MARK not in frame.columns:
        return False
    return any(not is_missing(v) for v in frame[STEADY_MARK].astype(object).tolist())


def window_of(marks: Sequence[Any]) -> str:
    """The window of a configuration whose used runs have these ``steady_state.window_s``
    cells: the steady state when every one of them has one, else the whole window."""
    return STEADY if marks and all(not is_missing(m) for m in marks) else WHOLE


def source(whole_metric: str, window: Any) -> str:
    """The results.csv figure a headline figure takes in ``window``."""
    return HEADLINES[whole_metric][1] if window == STEADY else whole_metric


def headline(summary: pd.DataFrame, whole_metric: str) -> str:
    """The summary figure the table and the plots show for ``whole_metric``: its headline
    (window-chosen) statistics where the summary has them, else the whole window's."""
    name = HEADLINES[whole_metric][0]
    return name if f"{name}.mean" in summary.columns else whole_metric


def whole_metric(metric: str) -> str:
    """``headline.j_per_output_token`` -> ``energy.j_per_output_token``; others unchanged."""
    for whole, (name, _) in HEADLINES.items():
        if metric == name:
            return whole
    return metric


def windows(summary: pd.DataFrame) -> list[str]:
    """Per summary row, its window; the whole window everywhere when there is no such column."""
    if WINDOW not in summary.columns:
        return [WHOLE] * len(summary)
    return [str(v) if not is_missing(v) else WHOLE for v in summary[WINDOW].astype(object)]


def window_note(summary: pd.DataFrame, figures: str = "J/tok, tok/s, conc") -> str | None:
    """Which window ``figures`` come from, in one sentence; None where no row has a steady state."""
    if WINDOW not in summary.columns:
        return None
    rows = windows(summary)
    rules = [] if RULE not in summary.columns else summary[RULE].astype(object).tolist()
    names = sorted({RULE_NAMES.get(str(r), str(r)) for r in rules if not is_missing(r)})
    rule = f" ({'; '.join(names)})" if names else ""
    if all(w == STEADY for w in rows):
        return f"{figures}: steady state{rule} in every row"
    if all(w == WHOLE for w in rows):
        return f"{figures}: whole window (no configuration has a steady state in every repeat)"
    return (
        f"{figures}: steady state{rule} where window says so; whole window where a "
        "configuration has no steady state in some repeat"
    )


def short_window(summary: pd.DataFrame) -> str | None:
    """The window of the headline figures in a few words, for a plot's note; None where no run
    has a steady state."""
    if WINDOW not in summary.columns:
        return None
    rows = set(windows(summary))
    if rows == {STEADY}:
        return "steady state"
    if rows == {WHOLE}:
        return "whole window"
    return "steady state where every repeat has one, else whole window"
