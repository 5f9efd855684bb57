"""Where the window's energy goes, filled into the result: ``energy``'s and ``steady_state``'s
phase split and fitted step costs, each request's energy in ``requests.jsonl`` and each step's in
``steps.csv`` (the arithmetic is ``llem.figures.attribution``'s; the spans' energies
``llem.measure.span_energy``'s; the files' writing ``llem.runner.energy_files``'; a figure
published with its interval ``llem.runner.published``').

The one call the run makes, once ``requests.jsonl`` and ``steps.csv`` are written:
``fill_attribution(result, steps, session, run_dir, why_none)``, ``steps`` being the engine's
steps (``ServeOutput.steps``, or a static batch's) and ``why_none`` the reason the figures are
null when ``steps`` is None.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path

from llem.figures.attribution import METHOD, Attribution, Part, attribute
from llem.figures.bins import Bins, group, interval_s, per_span
from llem.figures.step_shares import StepSpan, spans
from llem.measure import MeasurementSession
from llem.measure.meter import WindowResult
from llem.measure.power_source import PowerSource
from llem.measure.span_energy import SPAN_METHOD, SpanEnergies, span_energies
from llem.result import (
    Figure,
    FitRecord,
    RunResult,
)
from llem.result.figure import with_figures
from llem.runner.energy_files import write_request_energies, write_step_energies
from llem.runner.lag import Lag, estimate_lag, shifted, with_lag_spread
from llem.runner.published import with_interval
from llem.vocabulary.workload import EngineStep

NO_STEPS = "the engine exposes no per-step record, so energy cannot be attributed to its steps"
PHASE_FIGURES = (
    "prefill_j",
    "decode_j",
    "between_steps_j",
    "j_per_prefill_token",
    "j_per_decode_token",
)


@dataclasses.dataclass(frozen=True)
class _Done:
    cut: list[StepSpan]
    att: Attribution


def attribute_window(
    steps: Sequence[EngineStep],
    window: WindowResult,
    source: PowerSource | None,
    t0: float,
    t1: float,
    *,
    unavailable_reason: str | None = None,
    ceiling_w: float | None = None,
    lag_s: float | None = None,
) -> tuple[list[StepSpan], Attribution] | str:
    """The attribution of ``steps`` over ``[t0, t1]`` of a measured window (its spans grouped
    into intervals the timeline resolves, ``llem.figures.bins``), or the reason there is none.
    The steps are moved ``lag_s`` later to meet the power timeline (estimated from the window
    where None: ``llem.runner.lag``)."""
    if not any(t0 < s.end_s <= t1 for s in steps):
        return "no engine step ended inside the span"

    def measure(at: Sequence[float]) -> SpanEnergies | str:
        return span_energies(
            window, at, source=source, unavailable_reason=unavailable_reason, ceiling_w=ceiling_w
        )

    lag = Lag(lag_s, lag_s, lag_s) if lag_s is not None else estimate_lag(steps, t0, t1, measure)
    got = _attribute_at(steps, lag.lag_s, t0, t1, measure, spread=True)
    if isinstance(got, str):
        return got
    cut, att = got
    att = dataclasses.replace(att, lag_s=lag.lag_s, lag_null_reason=lag.null_reason)
    others = [
        _attribute_at(steps, x, t0, t1, measure, spread=False)
        for x in {lag.low_s, lag.high_s} - {lag.lag_s}
    ]
    return cut, with_lag_spread(att, [o[1] for o in others if not isinstance(o, str)])


def _attribute_at(
    steps: Sequence[EngineStep],
    lag_s: float,
    t0: float,
    t1: float,
    measure: Callable[[Sequence[float]], SpanEnergies | str],
    *,
    spread: bool,
) -> tuple[list[StepSpan], Attribution] | str:
    """The attribution with the steps moved ``lag_s`` later (``spread``: ``attribute``'s)."""
    cut = spans(shifted(steps, lag_s, t1), t0, t1)
    edges = [s.start_s for s in cut] + [cut[-1].end_s]
    got = measure(edges)
    if isinstance(got, str):
        return got
    bins = measured_bins(edges, got, measure)
    if isinstance(bins, str):
        return bins
    att = attribute(cut, got.energy_j, got.timing_bound_j, got.scale_relative, bins, spread=spread)
    return cut, att


def measured_bins(
    edges: Sequence[float],
    got: SpanEnergies,
    measure: Callable[[Sequence[float]], SpanEnergies | str],
    grouping: Callable[[float], list[tuple[int, int]]] | None = None,
) -> Bins | str:
    """The spans between ``edges`` (measured as ``got``) grouped into intervals the timeline
    resolves (``llem.figures.bins.interval_s``; ``grouping(min_s)``, or consecutive spans by
    default, ``llem.figures.bins.group``), measured as such: energy moved across an inner edge
    is bounded by half the larger of its two intervals' moved energy (``R x min(d, 2r)``: ``R r``
    per edge); none crosses the window's outer edges, where the timeline is held to the
    measured total."""
    durations = [b - a for a, b in zip(edges, edges[1:], strict=False)]
    min_s = interval_s(got.resolution_s, edges[-1] - edges[0])
    groups = grouping(min_s) if grouping is not None else group(durations, min_s)
    if all(hi - lo == 1 for lo, hi in groups):
        b = per_span(got.energy_j, got.timing_bound_j)
        return dataclasses.replace(b, resolution_s=got.resolution_s, min_s=min_s)
    whole = measure([edges[lo] for lo, _ in groups] + [edges[-1]])
    if isinstance(whole, str):
        return whole
    moved = whole.edge_j
    inner = [max(moved[j - 1], moved[j]) / 2 for j in range(1, len(moved))]
    return Bins(
        tuple(groups),
        whole.energy_j,
        tuple(max(t - m, 0.0) for t, m in zip(whole.timing_bound_j, moved, strict=True)),
        (0.0, *inner, 0.0),
        got.resolution_s,
        min_s,
    )


def fill_attribution(
    result: RunResult,
    steps: Sequence[EngineStep] | None,
    session: MeasurementSession,
    run_dir: Path,
    why_none: str = NO_STEPS,
    shares_estimated: str | None = None,
) -> None:
    """The attribution's fields of the result and its files (module docstring).
    ``shares_estimated``: why the steps' per-request shares are an estimate (the engine did not
    say where each request's prompt was computed); each request's energy is then null with it."""
    window = session.last_window
    if window is None:
        return
    whole = _attribute(steps, why_none, window, window.start_s, window.end_s, session, result)
    figures = _figures(whole)
    figures["unattributed_j"] = (
        whole
        if isinstance(whole, Figure)
        else _part(
            whole.att.unattributed, whole.att.split_null_reason, whole.att.interval_null_reason
        )
    )
    result.set_figures("energy", figures)
    method = None if isinstance(whole, Figure) else f"{METHOD}; {SPAN_METHOD}"
    result.energy = dataclasses.replace(result.energy, attribution_method=method)
    _fit_reasons(result, "energy", whole)
    _steady(result, steps, why_none, window, session)
    if isinstance(whole, Figure):
        write_request_energies(result, run_dir, None, whole.null_reason, shares_estimated)
        return
    att = whole.att
    write_request_energies(
        result, run_dir, att.requests, att.requests_null_reason, shares_estimated
    )
    write_step_energies(run_dir, whole.cut, att.span_energy_j, window.start_s)


def _attribute(
    steps: Sequence[EngineStep] | None,
    why_none: str,
    window: WindowResult,
    t0: float,
    t1: float,
    session: MeasurementSession,
    result: RunResult,
) -> _Done | Figure:
    """The attribution over ``[t0, t1]``, or a null figure with the reason."""
    if steps is None:
        return Figure.null(why_none)
    got = attribute_window(
        steps,
        window,
        session.source,
        t0,
        t1,
        unavailable_reason=session.unavailable_reason,
        ceiling_w=_ceiling_w(result),
    )
    if isinstance(got, str):
        return Figure.null(got)
    return _Done(*got)


def _ceiling_w(result: RunResult) -> float | None:
    """The measured GPUs' power limits together, where every one is known."""
    limits = [g.power_limit_w for g in result.hardware.gpus]
    known = [float(w) for w in limits if w is not None]
    if not limits or len(known) < len(limits):
        return None
    return sum(known)


def _part(p: Part | None, why: str | None, interval_why: str | None = None) -> Figure:
    if p is None:
        return Figure.null(why or "not attributed")
    return with_interval(p.energy_j, p.bound_j, p.ci95_j, interval_why)


def _figures(done: _Done | Figure) -> dict[str, Figure | dict[str, Figure]]:
    """The phase split, the costs and the fit as figures (all null with the reason)."""
    if isinstance(done, Figure):
        return {name: done for name in (*PHASE_FIGURES, "fit")}
    att, fit = done.att, done.att.fit
    why, half = att.split_null_reason, att.coefficient_ci95
    no_half = att.interval_null_reason
    return {
        "prefill_j": _part(att.prefill, why, no_half),
        "decode_j": _part(att.decode, why, no_half),
        "between_steps_j": _part(att.between, why, no_half),
        "j_per_prefill_token": with_interval(
            fit.a.value, fit.a.bound, half.get("a"), no_half, fit.a.null_reason, "J/token"
        ),
        "j_per_decode_token": with_interval(
            fit.b.value, fit.b.bound, half.get("b"), no_half, fit.b.null_reason, "J/token"
        ),
        "fit": Figure(
            FitRecord(
                a=fit.a.value,
                a_se=fit.a.se,
                b=fit.b.value,
                b_se=fit.b.se,
                p_static_w=fit.p_static.value,
                p_static_se=fit.p_static.se,
                p_between_w=fit.p_between.value,
                k=fit.k.value,
                k_se=fit.k.se,
                lag_s=None if att.lag_null_reason else att.lag_s,
                r2=fit.r2,
                n_steps=sum(1 for s in done.cut if s.step is not None),
                n_intervals=fit.n_steps,
                interval_min_s=att.bins.min_s,
                split=att.split_method,
            )
        ),
    }


def _fit_reasons(result: RunResult, where: str, done: _Done | Figure) -> None:
    """Why an entry of ``fit`` is null: ``null_reasons["<where>.fit.<key>"]``."""
    for key in [k for k in result.null_reasons if k.startswith(f"{where}.fit.")]:
        del result.null_reasons[key]
    if isinstance(done, Figure):
        return
    fit = done.att.fit
    for key, c in (
        ("a", fit.a),
        ("b", fit.b),
        ("p_static_w", fit.p_static),
        ("p_between_w", fit.p_between),
        ("k", fit.k),
    ):
        if c.value is None:
            result.null_reasons[f"{where}.fit.{key}"] = c.null_reason or "not identified"
        elif c.se is None:
            result.null_reasons[f"{where}.fit.{key}_se"] = c.se_null_reason or "unknown"
    if fit.r2 is None:
        result.null_reasons[f"{where}.fit.r2"] = fit.r2_null_reason or "unknown"
    if done.att.lag_null_reason:
        result.null_reasons[f"{where}.fit.lag_s"] = done.att.lag_null_reason
    if done.att.split_null_reason:
        result.null_reasons[f"{where}.fit.split"] = done.att.split_null_reason


def _steady(
    result: RunResult,
    steps: Sequence[EngineStep] | None,
    why_none: str,
    window: WindowResult,
    session: MeasurementSession,
) -> None:
    section = result.steady_state
    if section is None:
        return
    t0, t1 = window.start_s + section.start_s, window.start_s + section.end_s
    done = _attribute(steps, why_none, window, t0, t1, session, result)
    updated, reasons = with_figures(section, "steady_state", _figures(done))
    method = None if isinstance(done, Figure) else f"{METHOD}; {SPAN_METHOD}"
    result.steady_state = dataclasses.replace(updated, attribution_method=method)
    result.null_reasons.update(reasons)
    _fit_reasons(result, "steady_state", done)
