"""The energy of speculative decoding's draft work against its verification, filled into the
result's ``speculative`` section: ``draft_energy_j``, ``verification_energy_j``,
``draft_energy_fraction`` and ``draft_j_per_accepted_draft_token``, each with its bound and 95 %
interval or null with the reason (the arithmetic is ``llem.figures.draft_energy``'s, the spans'
energies ``llem.measure.span_energy``'s, the intervals ``llem.runner.attribution``'s).

The one call the run makes, once the engine's facts are written (``write_window_facts``):
``fill_draft_energy(result, spans, session)``, ``spans`` being the engine's record of when its
drafts ran (None: it records none).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from llem.figures.draft_energy import (
    DraftEnergy,
    EnergyEstimate,
    cut,
    cycles,
    phase_seconds,
    split,
)
from llem.measure import MeasurementSession
from llem.measure.meter import WindowResult
from llem.measure.power_source import PowerSource
from llem.measure.span_energy import SpanEnergies, span_energies
from llem.result import Figure, RunResult
from llem.runner.attribution import measured_bins
from llem.runner.published import with_interval
from llem.vocabulary.speculation import DraftSpans

NO_SPANS = (
    "the engine records no draft spans (llem records when each draft ran on the PyTorch "
    "engine only)"
)
DRAFT_FIGURES = (
    "draft_energy_j",
    "verification_energy_j",
    "draft_energy_fraction",
    "draft_j_per_accepted_draft_token",
)


def draft_energy_window(
    spans: DraftSpans,
    window: WindowResult,
    source: PowerSource | None,
    t0: float,
    t1: float,
    *,
    unavailable_reason: str | None = None,
    ceiling_w: float | None = None,
    lag_s: float = 0.0,
) -> DraftEnergy | str:
    """The draft's and the verification's energy over ``[t0, t1]`` of a measured window, the
    spans moved ``lag_s`` later to meet the power timeline (not on a timeline of resolution 0,
    a replayed trace, which does not lag); or the reason there is none."""

    def measure(at: Sequence[float]) -> SpanEnergies | str:
        return span_energies(
            window, at, source=source, unavailable_reason=unavailable_reason, ceiling_w=ceiling_w
        )

    whole = measure([t0, t1])
    if isinstance(whole, str):
        return whole
    lag_s = lag_s if whole.resolution_s > 0 else 0.0
    moved = [[(a + lag_s, b + lag_s) for a, b in x] for x in (spans.draft, spans.verification)]
    pieces = cut(moved[0], moved[1], t0, t1)
    if not pieces:
        return "the window is empty"
    edges = [s.start_s for s in pieces] + [pieces[-1].end_s]
    got = measure(edges)
    if isinstance(got, str):
        return got
    bins = measured_bins(edges, got, measure, lambda min_s: cycles(pieces, min_s))
    if isinstance(bins, str):
        return bins
    out = split(pieces, bins, got.scale_relative)
    return dataclasses.replace(out, lag_s=lag_s)


def fill_draft_energy(
    result: RunResult, spans: DraftSpans | None, session: MeasurementSession
) -> None:
    """The section's draft and verification energy (module docstring); nothing where the run
    did not speculate."""
    section = result.speculative
    window = session.last_window
    if section is None or window is None:
        return
    if spans is None:
        result.set_figures("speculative", {name: Figure.null(NO_SPANS) for name in DRAFT_FIGURES})
        for name in ("draft_s", "verification_s", "draft_energy_method"):
            result.null_reasons[f"speculative.{name}"] = NO_SPANS
        return
    d_s, v_s = phase_seconds(cut(spans.draft, spans.verification, window.start_s, window.end_s))
    result.speculative = section = dataclasses.replace(
        section, draft_s=round(d_s, 6), verification_s=round(v_s, 6)
    )
    lag = _lag_s(result)
    got = draft_energy_window(
        spans,
        window,
        session.source,
        window.start_s,
        window.end_s,
        unavailable_reason=session.unavailable_reason,
        lag_s=lag,
    )
    if isinstance(got, str):
        result.set_figures("speculative", {name: Figure.null(got) for name in DRAFT_FIGURES})
        result.null_reasons["speculative.draft_energy_method"] = got
        return
    result.set_figures("speculative", _figures(got, section.draft_tokens_accepted))
    section = result.speculative
    assert section is not None
    moved = f"; the spans moved {got.lag_s * 1000:.0f} ms later (energy.fit.lag_s)"
    method = got.method + (moved if got.lag_s else "")
    result.speculative = dataclasses.replace(section, draft_energy_method=method or None)
    if not method:
        result.null_reasons["speculative.draft_energy_method"] = got.null_reason or "not measured"


def _lag_s(result: RunResult) -> float:
    """How far the power timeline lags the engine's steps, as the attribution estimated it
    from the window (0 where it did not)."""
    fit = result.energy.fit
    return fit.lag_s if fit is not None and fit.lag_s is not None else 0.0


def _figures(got: DraftEnergy, accepted: int) -> dict[str, Figure | dict[str, Figure]]:
    if got.null_reason is not None or got.draft is None or got.verification is None:
        why = got.null_reason or "not separated"
        return {name: Figure.null(why) for name in DRAFT_FIGURES}
    draft = _energy(got.draft)
    out: dict[str, Figure | dict[str, Figure]] = {
        "draft_energy_j": draft,
        "verification_energy_j": _energy(got.verification),
    }
    out["draft_energy_fraction"] = _per(
        draft, got.draft, got.window_j, "of the window's energy", ""
    )
    out["draft_j_per_accepted_draft_token"] = (
        _per(draft, got.draft, accepted, "per accepted draft token", "J/token")
        if accepted
        else Figure.null("no draft token was accepted in the window")
    )
    return out


def _energy(e: EnergyEstimate) -> Figure:
    if e.energy_j <= 0:
        return Figure.null(
            f"not resolved: the fitted energy {e.energy_j:.4g} ± {e.ci95_j:.2g} J is not above 0"
        )
    return with_interval(e.energy_j, e.bound_j, e.ci95_j, None, unit="J")


def _per(draft: Figure, e: EnergyEstimate, by: float, what: str, unit: str) -> Figure:
    """The draft's energy over ``by`` (its bound and interval scaled alike), null as it is."""
    if draft.value is None:
        return draft
    if by <= 0:
        return Figure.null(f"nothing to divide by {what}")
    return with_interval(e.energy_j / by, e.bound_j / by, e.ci95_j / by, None, unit=unit)
