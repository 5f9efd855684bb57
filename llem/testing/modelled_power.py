"""A modelled power source for tests and the bench: power as a known function of what the engine
is doing, so that the attribution (``llem.figures.attribution``) can be checked against a planted
truth on real engines' step schedules (the truth itself is the tests' own: the planted costs of
each request's tokens; a GPU that does not draw the fitted model, a simulated engine and an
NVML-like sensor are ``llem.testing.truth``'s).

``ModelledPower`` is a ``fake_pynvml`` waveform built from a list of engine steps and a
``PlantedModel``: during a step of ``d`` seconds that computes ``p`` prefill and ``q`` decode
tokens the power is ``static_w + (a p + b q) / d`` (so the step consumes exactly ``static_w d + a p
+ b q`` joules), and ``idle_w`` between steps. A ``FakeGpu`` given this waveform is read by the
real measurement session on a virtual clock (``measure_modelled``), at the chosen sampling rate
and with the chosen counter refresh (the fake's counter quantisation), so the attribution sees
what it would see on a GPU whose power follows the model.

How it sees the engine: the steps are synthetic (``simulate``: a static batch, or continuous
batching under open-loop arrivals, with step durations shaped like a real engine's), planted on
the virtual clock before the window runs. A live engine is not used: a sampler reads the power
*now*, while a step only becomes known when it ends, and a second run of the same schedule on a
real engine would not repeat the first run's step times, so a replayed trace would not match it.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Sequence
from dataclasses import dataclass

from llem.figures.attribution import StepSpan, spans
from llem.measure import MeasurementSession
from llem.measure.meter import WindowResult
from llem.testing.clocks import SteppingClock
from llem.testing.fake_pynvml import FakeGpu, Waveform
from llem.testing.truth.sensor import Sensed
from llem.testing.virtual_window import measure_window, step_moved
from llem.vocabulary.workload import EngineStep, StepShare


@dataclass(frozen=True)
class PlantedModel:
    a_j: float  # J per prefill token
    b_j: float  # J per decode token
    static_w: float  # W while a step runs
    idle_w: float  # W between steps


class ModelledPower(Waveform):
    """Power that follows ``model`` over ``steps`` (each with a start; module docstring)."""

    def __init__(self, steps: Sequence[EngineStep], model: PlantedModel) -> None:
        self.steps = sorted(steps, key=lambda s: s.end_s)
        self.model = model
        self._starts = [float(s.start_s or s.end_s) for s in self.steps]
        self._cum = [0.0]  # energy from the first step's start to each step's end
        for i, s in enumerate(self.steps):
            gap = self._starts[i] - (self.steps[i - 1].end_s if i else self._starts[0])
            self._cum.append(self._cum[-1] + model.idle_w * gap + self.step_j(s))

    def step_j(self, s: EngineStep) -> float:
        m = self.model
        d = s.end_s - float(s.start_s or s.end_s)
        return m.static_w * d + m.a_j * (s.prefill_tokens or 0) + m.b_j * (s.decode_tokens or 0)

    def power(self, t: float) -> float:
        i = bisect.bisect_right(self._starts, t) - 1
        if i < 0 or t >= self.steps[i].end_s:
            return self.model.idle_w
        s = self.steps[i]
        d = s.end_s - self._starts[i]
        tokens_j = self.model.a_j * (s.prefill_tokens or 0) + self.model.b_j * (
            s.decode_tokens or 0
        )
        return self.model.static_w + (tokens_j / d if d > 0 else 0.0)

    def _until(self, t: float) -> float:
        """Energy from the first step's start to ``t`` (idle before it counts negative)."""
        if not self.steps or t <= self._starts[0]:
            return self.model.idle_w * (t - (self._starts[0] if self.steps else 0.0))
        i = bisect.bisect_right(self._starts, t) - 1
        s, start = self.steps[i], self._starts[i]
        done = self._cum[i] + (self.model.idle_w * (start - self.steps[i - 1].end_s) if i else 0.0)
        if t >= s.end_s:
            return self._cum[i + 1] + self.model.idle_w * (t - s.end_s)
        return done + self.power(t) * (t - start)

    def energy(self, a: float, b: float) -> float:
        return self._until(b) - self._until(a)


@dataclass(frozen=True)
class StepTiming:
    """Step durations shaped like a real engine's: fixed cost, per prefill token, per running
    request, and a relative jitter (seeded)."""

    base_s: float = 0.012
    per_prefill_token_s: float = 2e-5
    per_running_s: float = 2e-4
    jitter: float = 0.15


def simulate(
    arrivals_s: Sequence[float],
    input_tokens: Sequence[int],
    output_tokens: Sequence[int],
    max_batch: int,
    *,
    static: bool = False,
    timing: StepTiming = StepTiming(),
    seed: int = 0,
) -> list[EngineStep]:
    """Engine steps of a schedule: requests join at their arrival (static: only when the batch
    has drained), the step that prefills a request also yields its first token, and each later
    step decodes one token of every running request."""
    rng = random.Random(seed)
    order = sorted(range(len(arrivals_s)), key=lambda i: arrivals_s[i])
    t = float(min(arrivals_s))
    running: dict[int, int] = {}
    steps: list[EngineStep] = []
    while order or running:
        ready = [i for i in order if arrivals_s[i] <= t]
        if static and running:
            ready = []
        joins = ready[: max_batch - len(running)]
        if not joins and not running:
            t = arrivals_s[order[0]]
            continue
        order = [i for i in order if i not in joins]
        shares = [StepShare(i, 0, 1) for i in running] + [
            StepShare(i, input_tokens[i], 0) for i in joins
        ]
        for i in joins:
            running[i] = output_tokens[i] - 1
        steps.append(_step(t, shares, timing, rng))
        t = steps[-1].end_s
        running = {i: left - (1 if i not in joins else 0) for i, left in running.items()}
        running = {i: left for i, left in running.items() if left > 0}
    return steps


def _step(t: float, shares: list[StepShare], timing: StepTiming, rng: random.Random) -> EngineStep:
    p = sum(s.prefill_tokens for s in shares)
    q = sum(s.decode_tokens for s in shares)
    d = timing.base_s + timing.per_prefill_token_s * p + timing.per_running_s * len(shares)
    d *= 1.0 + timing.jitter * rng.uniform(-1.0, 1.0)
    return EngineStep(t + d, len(shares), p, q, start_s=t, shares=tuple(shares))


def steps_moved(steps: Sequence[EngineStep], by_s: float) -> list[EngineStep]:
    return [step_moved(s, by_s) for s in steps]


@dataclass(frozen=True)
class Measured:
    window: WindowResult
    session: MeasurementSession
    steps: list[EngineStep]  # on the session's clock
    power: ModelledPower


def measure_modelled(
    steps: Sequence[EngineStep],
    model: PlantedModel,
    *,
    sample_hz: float,
    counter_update_s: float = 0.1,
    lead_s: float = 0.2,
    tail_s: float = 0.2,
    sampled_fraction: float | None = None,
) -> Measured:
    """Run a measured window over ``steps`` (moved to start ``lead_s`` after the window's start)
    with a fake NVML GPU whose power follows ``model``, on a virtual clock. With
    ``sampled_fraction`` the GPU is read through NVML's sensor (``llem.testing.truth.sensor``:
    readings per ``counter_update_s`` window from that fraction of it), else exactly."""
    clock = SteppingClock()
    window_start = clock.now() + 0.1
    first = min(float(s.start_s or s.end_s) for s in steps)
    placed = steps_moved(steps, window_start + lead_s - first)
    power = ModelledPower(placed, model)
    shown: Waveform = power
    if sampled_fraction is not None:
        shown = Sensed(power, counter_update_s, sampled_fraction)
    gpu = FakeGpu("GPU-modelled", power=shown, counter_update_s=counter_update_s)
    until = max(st.end_s for st in placed) + tail_s
    session = measure_window(gpu, clock, sample_hz=sample_hz, until_s=until)
    assert session.last_window is not None
    return Measured(session.last_window, session, placed, power)


def window_spans(m: Measured) -> list[StepSpan]:
    return spans(m.steps, m.window.start_s, m.window.end_s)
