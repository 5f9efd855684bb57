"""Uncertainty bounds of a window's energy, from how the source measured it.

Each bound is a worst-case bound in joules (not a standard deviation): the true energy of the
window lies within ``figure +/- bound`` as far as the source's own limits go.

* ``nvml_counter``: NVML's total-energy counter counts whole millijoules and is refreshed about
  every ``COUNTER_UPDATE_S`` (100 ms); a read returns the value of its last refresh. Each edge is
  off by at most one resolution step plus the energy of one update period at that edge's power:
  ``2 * COUNTER_RESOLUTION_J + COUNTER_UPDATE_S * (P_start + P_end)``.
* ``nvml_power``: the trapezoid integral of sampled power. A step change ``dP`` between two samples
  ``dt`` apart is off by at most ``dP * dt / 2``, i.e. ``dP / (2 * sample_hz)`` J per step change;
  summed over the samples, ``sum |P[i+1] - P[i]| * (t[i+1] - t[i]) / 2``. Excursions that go and
  come back between two samples are invisible to it (sample faster to see them).
* ``replay``: the exact integral of the piecewise-linear trace; only floating-point rounding
  remains, bounded by ``REPLAY_RELATIVE_BOUND`` of the figure.

Derived figures divide by exact counts (tokens, requests) or the window length, so their bounds are
the energy bound divided the same way; see ``ratio_bound`` and ``inverse_ratio_bound``.
"""

from __future__ import annotations

from collections.abc import Sequence

COUNTER_RESOLUTION_J = 0.001  # NVML reports the counter in mJ
COUNTER_UPDATE_S = 0.1  # NVML refreshes the counter about every 100 ms
REPLAY_RELATIVE_BOUND = 1e-9  # float rounding of the exact piecewise-linear integral

METHOD = {
    "nvml_counter": (
        f"energy counter: 2 x {COUNTER_RESOLUTION_J * 1000:g} mJ resolution + "
        f"{COUNTER_UPDATE_S * 1000:g} ms update period x (power at start + power at end)"
    ),
    "nvml_power": "trapezoid integral: sum of |dP| x dt / 2 over consecutive power samples",
    "replay": f"exact integral of the trace: float rounding, {REPLAY_RELATIVE_BOUND:g} x energy",
}


def counter_bound_j(power_start_w: float, power_end_w: float) -> float:
    """Bound of a counter delta with power ``power_start_w``/``power_end_w`` at the edges."""
    return 2 * COUNTER_RESOLUTION_J + COUNTER_UPDATE_S * (abs(power_start_w) + abs(power_end_w))


def trapezoid_bound_j(times_s: Sequence[float], power_w: Sequence[float]) -> float:
    """Bound of the trapezoid integral through ``(times_s, power_w)`` (non-decreasing times)."""
    return sum(
        abs(power_w[i + 1] - power_w[i]) * (times_s[i + 1] - times_s[i]) / 2
        for i in range(len(times_s) - 1)
    )


def replay_bound_j(energy_j: float) -> float:
    return abs(energy_j) * REPLAY_RELATIVE_BOUND


def ratio_bound(bound: float | None, denominator: float) -> float | None:
    """Bound of ``E / denominator`` for an exact denominator."""
    if bound is None or denominator <= 0:
        return None
    return bound / denominator


def inverse_ratio_bound(
    numerator: float, energy_j: float | None, bound: float | None
) -> float | None:
    """Bound of ``numerator / E`` (e.g. tokens per J) when E is within ``+/- bound``: the larger
    of the two one-sided errors, which is on the side of ``E - bound``. None when E may be 0."""
    if energy_j is None or bound is None or energy_j <= 0 or bound >= energy_j:
        return None
    return numerator / (energy_j - bound) - numerator / energy_j
