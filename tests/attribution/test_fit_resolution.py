"""A fitted step cost that the steps cannot resolve is null with the reason, never a negative or
noise-sized J per token (as an H100 static batch at 64 gave: -0.0025 ± 0.0072 J/decode token)."""

from __future__ import annotations

import random

from llem.figures.energy_fit import StepRow, fit_steps


def _static_batch(decode_varies: bool, seed: int = 1) -> tuple[list[StepRow], list[float]]:
    rng = random.Random(seed)
    a, b, p_static = 0.004, 0.02, 250.0  # planted J/prefill token, J/decode token, W
    rows, energy = [], []
    for k in range(200):
        if k % 50 == 0:
            row = StepRow(64 * 128, 0, 0.08 + rng.uniform(-0.005, 0.005))
        else:
            q = rng.randint(8, 64) if decode_varies else 64
            row = StepRow(0, q, 0.03 + rng.uniform(-0.003, 0.003))
        rows.append(row)
        e = a * row.prefill_tokens + b * row.decode_tokens + p_static * row.duration_s
        energy.append(e + rng.gauss(0, 0.5))
    return rows, energy


def test_a_decode_cost_the_steps_cannot_separate_from_static_power_is_null_with_the_reason():
    rows, energy = _static_batch(decode_varies=False)
    fit = fit_steps(rows, energy, [0.0] * len(rows))
    assert fit.b.value is None
    assert fit.b.null_reason is not None and fit.b.null_reason.startswith("not resolved: ")
    assert fit.a.value is not None and abs(fit.a.value - 0.004) < 0.001


def test_the_same_cost_is_published_where_the_decode_batch_varies():
    rows, energy = _static_batch(decode_varies=True)
    fit = fit_steps(rows, energy, [0.0] * len(rows))
    assert fit.b.value is not None and abs(fit.b.value - 0.02) < 0.002
    assert fit.b.se is not None and fit.b.value > 2 * fit.b.se
