"""Uncertainty bounds of a window's energy, from how the source measured it.

Each bound is a worst-case bound in joules (not a standard deviation): the true energy of the
window lies within ``figure +/- bound`` as far as the limits named below go. A bound is the sum of
its components, and the components are recorded beside it (``energy.uncertainty_components``):

Every GPU figure below comes from the GPU's ``SensorSpec`` (``llem.devices.gpu``), which its vendor
module fills from its vendor's documentation; NVIDIA's (``llem.devices.nvidia_reader``) are:

* ``sensor_accuracy_j`` (GPU sources): the power sensor's own accuracy, ``max(sensor_relative x
  E, sensor_absolute_w x window_s)``. NVIDIA documents +/- 5 W for nvidia-smi's ``power.draw``
  (``nvidia-smi --help-query-gpu``: "accurate to within +/- 5 watts", for the average and the
  instant readings alike) and +/- 5 % of the current draw for ``nvmlDeviceGetPowerUsage`` (NVML API
  reference, stated for Fermi and Kepler). llem takes the larger of the two on every GPU. That the
  5 % figure holds on newer GPUs, and that the energy counter is as accurate as the power reading
  (NVIDIA states no accuracy for ``nvmlDeviceGetTotalEnergyConsumption``), are assumptions.
* ``counter_resolution_j`` + ``counter_update_j`` (``*_counter``): NVML's total-energy counter
  counts whole millijoules and is refreshed about every 100 ms (``counter_update_s``); a read
  returns the value of its last refresh. Each edge is off by at most one resolution step plus the
  energy of one update period at that edge's power:
  ``2 * counter_resolution_j + counter_update_s * (P_start + P_end)``.
* ``trapezoid_j`` (``*_power``): the trapezoid integral of sampled power. A step change ``dP``
  between two samples ``dt`` apart is off by at most ``dP * dt / 2``; summed over the samples,
  ``sum |P[i+1] - P[i]| * (t[i+1] - t[i]) / 2``. Excursions that go and come back between two
  samples are invisible to it (sample faster to see them).
* ``averaging_lag_j`` (``*_power`` read from an averaged reading, NVML's
  ``nvmlDeviceGetPowerUsage`` returning the mean of the last ``power_averaging_s`` = 1 s on Ampere
  and newer): integrating that moving average over ``[a, b]`` counts power from the second before
  ``a`` with a weight rising from 0 to 1 and leaves out the power of the last second before ``b``
  with a weight of the same shape, so it is off by at most ``power_averaging_s x max(A(a), A(b))``,
  A being the averaged readings at the two edges (each weighted term is between 0 and
  ``power_averaging_s x`` that edge's reading). 0 where the
  instantaneous field (``NVML_FI_DEV_POWER_INSTANT``) is read.
* ``float_rounding_j`` (``replay``): the exact integral of the piecewise-linear trace; only
  floating-point rounding remains, bounded by ``REPLAY_RELATIVE_BOUND`` of the figure.

Not covered: the sensor's part-time sampling (on A100/H100 the power sensor sees about 25 % of
the runtime, arXiv 2312.02741), so power that rises and falls between its internal samples is
missed by the counter and the readings alike; a sensor error larger than NVIDIA's figures; and
power drawn outside the board (CPU, host memory, fans, PSU losses).

Derived figures divide by exact counts (tokens, requests) or the window length, so their bounds are
the energy bound divided the same way; see ``ratio_bound`` and ``inverse_ratio_bound``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from llem.devices.gpu import SensorSpec

REPLAY_RELATIVE_BOUND = 1e-9  # float rounding of the exact piecewise-linear integral


def method_text(source: str, spec: SensorSpec | None) -> str:
    """How the bound of energy measured by ``source`` (``nvml_counter``, ``amdsmi_power``,
    ``replay``...) is made, in words, with the GPU's figures."""
    if source == "replay" or spec is None:
        return f"exact integral of the trace: float rounding, {REPLAY_RELATIVE_BOUND:g} x energy"
    sensor = (
        f"sensor accuracy max({spec.sensor_relative:.0%} x energy, "
        f"{spec.sensor_absolute_w:g} W x window_s) ({spec.source})"
    )
    if source.endswith("_counter"):
        return (
            f"energy counter: 2 x {spec.counter_resolution_j * 1000:g} mJ resolution + "
            f"{spec.counter_update_s * 1000:g} ms update period x (power at start + power at "
            "end) + " + sensor
        )
    lag = ""
    if spec.power_averaging_s > 0:
        lag = (
            f"averaging lag {spec.power_averaging_s:g} s x max(first, last reading) where the "
            f"readings are {spec.power_averaging_s:g} s averages ({spec.averaged_reading}) + "
        )
    trapezoid = "trapezoid integral: sum of |dP| x dt / 2 over consecutive power samples + "
    return trapezoid + lag + sensor


Components = dict[str, float]


def trapezoid_bound_j(times_s: Sequence[float], power_w: Sequence[float]) -> float:
    """Bound of the trapezoid integral through ``(times_s, power_w)`` (non-decreasing times)."""
    return sum(
        abs(power_w[i + 1] - power_w[i]) * (times_s[i + 1] - times_s[i]) / 2
        for i in range(len(times_s) - 1)
    )


def sensor_bound_j(energy_j: float, window_s: float, spec: SensorSpec) -> float:
    """The sensor's systematic accuracy over a window: the larger of the relative and absolute
    figures of ``spec`` (see the module docstring for NVIDIA's sources)."""
    return max(spec.sensor_relative * abs(energy_j), spec.sensor_absolute_w * max(window_s, 0.0))


def averaging_lag_bound_j(first_w: float, last_w: float, averaging_s: float) -> float:
    """Bound of integrating a trailing ``averaging_s`` moving average instead of the power itself,
    from the averaged readings at the window's two edges (0 for instantaneous readings)."""
    return averaging_s * max(abs(first_w), abs(last_w))


def counter_components(
    spec: SensorSpec, power_start_w: float, power_end_w: float, energy_j: float, window_s: float
) -> Components:
    """The components of an energy counter delta's bound."""
    return {
        "counter_resolution_j": 2 * spec.counter_resolution_j,
        "counter_update_j": spec.counter_update_s * (abs(power_start_w) + abs(power_end_w)),
        "sensor_accuracy_j": sensor_bound_j(energy_j, window_s, spec),
    }


def sampled_components(
    times_s: Sequence[float],
    power_w: Sequence[float],
    energy_j: float,
    window_s: float,
    spec: SensorSpec,
) -> Components:
    """The components of the bound of integrated power samples (``spec.power_averaging_s``: the
    length of the moving average behind each reading, 0 for instantaneous readings)."""
    return {
        "trapezoid_j": trapezoid_bound_j(times_s, power_w),
        "averaging_lag_j": averaging_lag_bound_j(power_w[0], power_w[-1], spec.power_averaging_s),
        "sensor_accuracy_j": sensor_bound_j(energy_j, window_s, spec),
    }


def replay_components(energy_j: float) -> Components:
    return {"float_rounding_j": replay_bound_j(energy_j)}


def combine(components: Mapping[str, float]) -> float:
    """A bound from its components: they are worst-case limits, so they add linearly."""
    return sum(components.values())


def add(parts: Sequence[Mapping[str, float]]) -> Components:
    """Components summed key by key (the bound of a sum over devices)."""
    out: Components = {}
    for p in parts:
        for k, v in p.items():
            out[k] = out.get(k, 0.0) + v
    return out


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
