"""The simulated GPU's physics: how long a step takes, what it draws, and whose energy it is.

``SimulatedGpu`` (not the model llem fits): a step reads the weights once and each request's KV
cache (memory time ``weight_read_s + kv_read_s x context tokens``) and computes every token (compute
time ``flop_s x tokens``, attention over a prefill chunk's earlier context included); the two
overlap in part, so the step lasts ``launch_s + max(m, c) + overlap x min(m, c)``. While it runs
the board draws ``busy_w + compute_w x u_c^compute_exp + memory_w x u_m^memory_exp``, ``u_c`` and
``u_m`` the fractions of the step that compute and memory are busy: prefill is compute-bound with
a draw that saturates, decode memory-bound with a draw that grows sub-linearly with the batch.
Between steps it draws ``idle_w``. Nothing here is linear in the tokens.

Whose energy (the truth llem is checked against, defined here and nowhere else): a step's energy
``power x duration`` is split between its requests, and between each request's prefill and decode,
in proportion to the time each one keeps the GPU's units busy: its tokens' compute time, its own
KV reads, and its tokens' share of the weight read (the weights are read once for every token of
the step). Energy between steps is no request's.

``Drift``: the board's baseline power drifting slowly (a sine of ``amplitude_w`` over
``period_s``: leakage that follows the temperature), added to whatever the board draws, in steps
and between them; a step's drift energy is its requests' by the same shares as the rest of it.

``LinearGpu`` plants llem's fitted model exactly (``static_w x duration + a x prefill tokens +
b x decode tokens``, the static part shared as ``SimulatedGpu`` shares a step: by busy time), so
that a fit's coefficients have a true value; its step durations are ``SimulatedGpu``'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from llem.testing.truth.engine import Work


class Physics(Protocol):
    @property
    def idle_w(self) -> float: ...

    def duration_s(self, work: Sequence[Work]) -> float: ...

    def power_w(self, work: Sequence[Work]) -> float: ...

    def parts(self, work: Sequence[Work]) -> list[tuple[float, float]]: ...


@dataclass(frozen=True)
class SimulatedGpu:
    idle_w: float = 70.0
    busy_w: float = 140.0
    compute_w: float = 380.0
    memory_w: float = 110.0
    compute_exp: float = 0.7
    memory_exp: float = 0.5
    launch_s: float = 0.0015
    weight_read_s: float = 0.008
    kv_read_s: float = 4e-7  # per context token read
    flop_s: float = 2.4e-5  # per token computed
    attention_s: float = 2e-9  # per prefill token x earlier context token
    overlap: float = 0.3

    def _times(self, work: Sequence[Work]) -> tuple[float, float]:
        mem = self.weight_read_s + self.kv_read_s * sum(w.context_tokens for w in work)
        cmp = sum(self._compute_s(w) for w in work)
        return mem, cmp

    def _compute_s(self, w: Work) -> float:
        tokens = w.prefill_tokens + w.decode_tokens
        return self.flop_s * tokens + self.attention_s * w.prefill_tokens * w.context_tokens

    def duration_s(self, work: Sequence[Work]) -> float:
        mem, cmp = self._times(work)
        return self.launch_s + max(mem, cmp) + self.overlap * min(mem, cmp)

    def power_w(self, work: Sequence[Work]) -> float:
        mem, cmp = self._times(work)
        d = self.duration_s(work)
        u_c, u_m = min(cmp / d, 1.0), min(mem / d, 1.0)
        return (
            self.busy_w
            + self.compute_w * u_c**self.compute_exp
            + self.memory_w * u_m**self.memory_exp
        )

    def busy_s(self, work: Sequence[Work]) -> list[float]:
        """The time each request keeps the GPU's units busy in the step: its tokens' compute,
        its own KV reads and its tokens' share of the weight read (module docstring)."""
        tokens = sum(w.prefill_tokens + w.decode_tokens for w in work)
        busy = []
        for w in work:
            n = w.prefill_tokens + w.decode_tokens
            weights = self.weight_read_s * n / tokens if tokens else 0.0
            busy.append(self._compute_s(w) + self.kv_read_s * w.context_tokens + weights)
        return busy

    def parts(self, work: Sequence[Work]) -> list[tuple[float, float]]:
        """Each request's (prefill J, decode J) of the step (module docstring)."""
        energy = self.power_w(work) * self.duration_s(work)
        busy = self.busy_s(work)
        total = sum(busy)
        out = []
        for w, b in zip(work, busy, strict=True):
            e = energy * b / total if total else energy / len(work)
            out.append((e, 0.0) if w.prefill_tokens else (0.0, e))
        return out


@dataclass(frozen=True)
class LinearGpu:
    """Power exactly llem's fitted model (module docstring)."""

    a_j: float = 0.004  # J per prefill token
    b_j: float = 0.05  # J per decode token
    static_w: float = 120.0
    idle_w: float = 60.0
    timing: SimulatedGpu = SimulatedGpu()

    def duration_s(self, work: Sequence[Work]) -> float:
        return self.timing.duration_s(work)

    def energy_j(self, work: Sequence[Work]) -> float:
        p = sum(w.prefill_tokens for w in work)
        q = sum(w.decode_tokens for w in work)
        return self.static_w * self.duration_s(work) + self.a_j * p + self.b_j * q

    def power_w(self, work: Sequence[Work]) -> float:
        return self.energy_j(work) / self.duration_s(work)

    def parts(self, work: Sequence[Work]) -> list[tuple[float, float]]:
        """Each token's planted cost, and the static power shared as ``SimulatedGpu`` shares a
        step: by the time each request keeps the units busy."""
        busy = self.timing.busy_s(work)
        total = sum(busy)
        static_j = self.static_w * self.duration_s(work)
        out = []
        for w, b in zip(work, busy, strict=True):
            static = static_j * (b / total if total else 1.0 / len(work))
            out.append(
                (
                    self.a_j * w.prefill_tokens + static * (w.prefill_tokens > 0),
                    self.b_j * w.decode_tokens + static * (w.prefill_tokens == 0),
                )
            )
        return out


@dataclass(frozen=True)
class Drift:
    """Baseline power that drifts slowly (module docstring): ``amplitude_w x sin(2 pi t /
    period_s + phase)`` watts on top of the draw."""

    amplitude_w: float = 0.0
    period_s: float = 40.0
    phase: float = 0.0

    def power_w(self, t: float) -> float:
        return self.amplitude_w * math.sin(2 * math.pi * t / self.period_s + self.phase)

    def energy_j(self, a: float, b: float) -> float:
        w = 2 * math.pi / self.period_s
        return -self.amplitude_w / w * (math.cos(w * b + self.phase) - math.cos(w * a + self.phase))
