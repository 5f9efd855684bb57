"""The 95 % intervals of the attributed figures (llem.figures.interval) and how the result carries
them: the covariance on planted regressions, the sharing convention on a planted step model, the
null of a figure whose interval is wider than itself, result.json's and requests.jsonl's fields."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from attribution.test_attribution import PLAN, A, B, P, _duration, _energies, _mixed_schedule
from attribution.test_attribution import _time_share as time_share
from llem.figures.attribution import RequestEnergy, attribute, spans
from llem.figures.interval import Z95, coefficient_covariance, residual_variance
from llem.result import Figure, RequestRecord, RunResult
from llem.runner.energy_files import request_energy
from llem.runner.published import UNRESOLVED, with_interval


def _covered(covariance: bool, seed: int = 7, reps: int = 200) -> float:
    """How often the slope's 95 % interval holds the planted 0.5, for a workload and errors that
    both run in streaks (AR(1), 0.5: neighbouring intervals) and errors that grow with the
    load."""
    rng = np.random.default_rng(seed)
    n, hits = 120, 0
    for _ in range(reps):
        load = np.zeros(n)
        noise = np.zeros(n)
        for i in range(1, n):
            load[i] = 0.5 * load[i - 1] + rng.normal()
            noise[i] = 0.5 * noise[i - 1] + rng.normal() * (1 + 0.3 * abs(load[i]))
        x = np.column_stack([np.ones(n), load])
        y = x @ np.array([2.0, 0.5]) + noise
        beta = np.linalg.lstsq(x, y, rcond=None)[0]
        resid = y - x @ beta
        if covariance:
            v = coefficient_covariance(x, resid)
        else:
            v = float(resid @ resid) / (n - 2) * np.linalg.inv(x.T @ x)
        hits += abs(beta[1] - 0.5) <= Z95 * np.sqrt(v[1, 1])
    return hits / reps


def test_the_sandwich_covers_a_planted_slope_where_the_textbook_error_does_not() -> None:
    """Errors that run in streaks beside a workload that does: the textbook s^2 (X'X)^-1 claims
    95 % and holds the planted slope 80 % of the time; the Newey-West sandwich 92 %."""
    assert _covered(covariance=False) < 0.85
    assert _covered(covariance=True) >= 0.90


def test_energy_moved_between_two_neighbours_counts_less_for_a_figure_that_takes_both() -> None:
    """Residuals +1 J and -1 J on adjacent intervals (energy the timeline moved across their
    edge): a figure taking both at weight 1 carries 2 - 2 x 0.75 = 0.5 J^2, one taking only the
    first 1 J^2."""
    assert residual_variance({0: 1.0, 1: 1.0}, [1.0, -1.0]) == pytest.approx(0.5)
    assert residual_variance({0: 1.0}, [1.0, -1.0]) == pytest.approx(1.0)
    assert residual_variance({}, [1.0]) == 0.0


def test_where_the_model_fits_exactly_the_interval_is_the_sharing_conventions_gap() -> None:
    """Planted costs, exact energies: no residual, no coefficient spread; what is left is the
    sharing convention: the prefill figure takes the middle of the fitted costs' split and the
    split by time alone, and its interval reaches both: in the mixed step r2's prefill is
    A x 500 J and its time's share of the static power by the one, its time's share of the whole
    step by the other; the half-width is half that gap."""
    cut = spans(_mixed_schedule(), 0.9, 1.3)
    got = attribute(cut, _energies(cut), [0.0] * len(cut))
    assert got.prefill is not None and got.prefill.ci95_j is not None
    s = time_share(2, 1)
    step = A * 500 + B * 1 + P * _duration(2)
    gap = abs(step * s - (A * 500 + P * _duration(2) * s))
    assert got.prefill.ci95_j == pytest.approx(gap / 2, rel=1e-3)
    assert len(PLAN[0]) == 1  # the first step (prefill alone) is the same either way


def test_a_figure_whose_interval_is_wider_than_itself_is_null_with_the_reason() -> None:
    wide = with_interval(100.0, 300.0, 60.0, None)
    assert wide.value is None and wide.null_reason is not None
    assert wide.null_reason.startswith(UNRESOLVED) and "100 ± 60 J" in wide.null_reason
    narrow = with_interval(100.0, 300.0, 40.0, None)
    assert (narrow.value, narrow.bound, narrow.ci95) == (100.0, 300.0, 40.0)
    none = with_interval(100.0, 300.0, None, "no interval: token share")
    assert none.value == 100.0 and none.ci95_null_reason == "no interval: token share"


def test_the_interval_is_written_beside_the_bound_and_reads_back(tmp_path: Path) -> None:
    result = RunResult(status="ok")
    result.set_figures(
        "energy",
        {
            "prefill_j": Figure(120.0, 300.0, ci95=20.0),
            "decode_j": Figure.null(f"{UNRESOLVED}: ..."),
            "between_steps_j": Figure(30.0, 10.0, ci95_null_reason="no interval: token share"),
        },
    )
    e = result.energy
    assert (e.prefill_j, e.prefill_j_uncertainty, e.prefill_j_ci95_half_width) == (120, 300, 20)
    assert e.decode_j is None and e.decode_j_ci95_half_width is None
    assert result.null_reasons["energy.between_steps_j_ci95_half_width"].startswith("no interval")
    assert result.figure("energy.prefill_j").ci95 == 20.0
    path = tmp_path / "result.json"
    path.write_text(json.dumps(result.to_json()))
    back = RunResult.from_json(path)
    assert back.energy.prefill_j_ci95_half_width == 20.0
    with pytest.raises(ValueError, match="no interval"):
        Figure(None, null_reason="x", ci95=1.0)


def test_a_requests_energy_wider_than_its_interval_is_null_on_its_line() -> None:
    record = RequestRecord(3, 0, None, 0.0, 0.1, 1.0, 10, 5, 100.0, 20.0, 1000.0, None)
    wide = request_energy(record, RequestEnergy(3, 10.0, 25.0, 4.0, 6.0, ci95_j=6.0))
    assert wide.energy_j is None and wide.prefill_j is None and wide.ci95_half_width_j is None
    assert wide.energy_null_reason is not None and wide.energy_null_reason.startswith(UNRESOLVED)
    ok = request_energy(record, RequestEnergy(3, 10.0, 25.0, 4.0, 6.0, ci95_j=4.0))
    assert (ok.energy_j, ok.bound_j, ok.ci95_half_width_j) == (10.0, 25.0, 4.0)
    assert ok.j_per_output_token == pytest.approx(2.0) and ok.energy_null_reason is None
