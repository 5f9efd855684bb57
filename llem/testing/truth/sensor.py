"""What NVML shows of the simulated GPU's power (``fake_pynvml`` waveforms).

``StepPower``: the true draw, piecewise constant: each step's power while it runs, idle power
elsewhere, plus the baseline's slow drift where there is one (``gpu.Drift``); its energy over any
interval is exact.

``Sensed``: the board's power sensor as NVML reports it on Ampere and Hopper. Time is cut into
``update_s`` windows (100 ms: the energy counter's and the readings' refresh); each window's
reading is the mean true power over only the first ``sampled_fraction`` of it (0.25 on A100/H100:
the sensor sees ~25 ms of each 100 ms, arXiv 2312.02741; 1.0 for a sensor that sees all of it),
and holds until the next window. Given to a ``FakeGpu`` with ``counter_update_s=update_s``, the
energy counter is the sum of the readings times the window (refreshed every window), the
instantaneous field the current reading, ``nvmlDeviceGetPowerUsage`` their trailing 1 s mean.
The reading is shown from the start of its window. Two departures from that ideal, as variants
(``lag_s`` and ``jitter_s``, both 0 by default): a sensor that lags the work (each reading is the
draw of ``lag_s`` earlier: MLPerf Power and Zeus align power to work with an offset), and a
sampled part of each window that does not start at the window's start but up to ``jitter_s``
later, a different offset in every window (seeded).
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Sequence

from llem.testing.fake_pynvml import Waveform
from llem.testing.truth.gpu import Drift


class StepPower(Waveform):
    """``watts[i]`` over ``[starts[i], ends[i])``, ``idle_w`` elsewhere (intervals sorted and
    disjoint)."""

    def __init__(
        self,
        starts: Sequence[float],
        ends: Sequence[float],
        watts: Sequence[float],
        idle_w: float,
        drift: Drift = Drift(),
    ) -> None:
        self.starts, self.ends, self.watts, self.idle_w = (
            list(starts),
            list(ends),
            list(watts),
            idle_w,
        )
        self.drift = drift
        self._cum = [0.0]  # extra energy above idle up to each step's end
        for a, b, w in zip(starts, ends, watts, strict=True):
            self._cum.append(self._cum[-1] + (w - idle_w) * (b - a))

    def power(self, t: float) -> float:
        i = bisect.bisect_right(self.starts, t) - 1
        base = self.watts[i] if i >= 0 and t < self.ends[i] else self.idle_w
        return base + self.drift.power_w(t)

    def _until(self, t: float) -> float:
        i = bisect.bisect_right(self.starts, t) - 1
        extra = self._cum[max(i, 0)]
        if i >= 0:
            inside = min(t, self.ends[i]) - self.starts[i]
            extra += (self.watts[i] - self.idle_w) * inside
        return self.idle_w * t + extra

    def energy(self, a: float, b: float) -> float:
        return self._until(b) - self._until(a) + self.drift.energy_j(a, b)


class Sensed(Waveform):
    """The sensor's view of ``true`` (module docstring); ``phase_s`` places the window grid."""

    def __init__(
        self,
        true: Waveform,
        update_s: float = 0.1,
        sampled_fraction: float = 0.25,
        phase_s: float = 0.0,
        lag_s: float = 0.0,
        jitter_s: float = 0.0,
        seed: int = 0,
    ) -> None:
        self.true, self.update_s, self.fraction, self.phase_s = (
            true,
            update_s,
            sampled_fraction,
            phase_s,
        )
        self.lag_s, self.jitter_s, self.seed = lag_s, jitter_s, seed
        self._readings: dict[int, float] = {}
        self._base: int | None = None  # the prefix sums start at this window
        self._prefix: list[float] = [0.0]  # sum of readings of windows base .. base + i - 1

    def _k(self, t: float) -> int:
        return math.floor((t - self.phase_s) / self.update_s)

    def reading(self, k: int) -> float:
        got = self._readings.get(k)
        if got is None:
            a = self.phase_s + k * self.update_s - self.lag_s + self._jitter(k)
            seen = self.fraction * self.update_s
            got = self._readings[k] = self.true.energy(a, a + seen) / seen
        return got

    def _jitter(self, k: int) -> float:
        """Where window ``k``'s sampled part starts after the window's start (seeded)."""
        if not self.jitter_s:
            return 0.0
        return random.Random(self.seed * 1_000_003 + k).uniform(0.0, self.jitter_s)

    def power(self, t: float) -> float:
        return self.reading(self._k(t))

    def energy(self, a: float, b: float) -> float:
        if b <= a:
            return -self.energy(b, a) if b < a else 0.0
        ka, kb = self._k(a), self._k(b)
        if ka == kb:
            return self.reading(ka) * (b - a)
        edge_a = self.phase_s + (ka + 1) * self.update_s
        edge_b = self.phase_s + kb * self.update_s
        inner = self._sum(ka + 1, kb) * self.update_s
        return self.reading(ka) * (edge_a - a) + inner + self.reading(kb) * (b - edge_b)

    def _sum(self, k0: int, k1: int) -> float:
        """Sum of the readings of windows ``k0 .. k1 - 1``."""
        if self._base is None:
            self._base = k0
        if k0 < self._base:
            return sum(self.reading(k) for k in range(k0, k1))
        while self._base + len(self._prefix) - 1 < k1:
            k = self._base + len(self._prefix) - 1
            self._prefix.append(self._prefix[-1] + self.reading(k))
        return self._prefix[k1 - self._base] - self._prefix[k0 - self._base]
