"""A whole simulated run: a schedule served by the simulated engine on the simulated GPU, read
through the NVML-like sensor by llem's real measurement session on a virtual clock, with the
truth per phase and per request from the physics alone.

    trace = engine.run(requests, spec, gpu)
    run = measure(trace, gpu, sample_hz=10.0)
    run.truth.prefill_j, run.truth.request_j[7], run.window, run.steps

The steps are planted on the clock before the window runs (a sampler reads power *now*, while an
engine reports a step when it ends); they start ``lead_s`` after the window opens, and the
window closes ``tail_s`` after the last step.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from llem.measure import MeasurementSession
from llem.measure.meter import WindowResult
from llem.testing.clocks import SteppingClock
from llem.testing.fake_pynvml import FakeGpu, Waveform
from llem.testing.truth import engine
from llem.testing.truth.engine import EngineSpec, Request, Trace
from llem.testing.truth.gpu import Drift, Physics, SimulatedGpu
from llem.testing.truth.sensor import Sensed, StepPower
from llem.testing.virtual_window import measure_window, step_moved
from llem.vocabulary.workload import EngineStep

POWER_LIMIT_W = 700.0
CLOCK_START_S = 1000.0  # a refresh instant of the sensor (its grid is at multiples of 100 ms)


@dataclass(frozen=True)
class Sensor:
    update_s: float = 0.1
    sampled_fraction: float = 0.25  # A100/H100; 1.0: a sensor that sees its whole window
    lag_s: float = 0.0  # each reading is the draw this long before (``sensor.Sensed``)
    jitter_s: float = 0.0  # the sampled part starts up to this long into its window
    seed: int = 0  # places the jitter


@dataclass(frozen=True)
class Truth:
    """From the physics (``gpu``): joules over the measured window and each request's joules."""

    window_j: float
    prefill_j: float
    decode_j: float
    between_j: float
    request_j: dict[int, float]
    prefill_tokens: int
    decode_tokens: int
    output_tokens: int  # sampled by the steps that end inside

    @property
    def j_per_output_token(self) -> float | None:
        """The window's energy per output token (a steady state's or a search objective's
        truth)."""
        return self.window_j / self.output_tokens if self.output_tokens else None


@dataclass(frozen=True)
class Run:
    trace: Trace
    steps: list[EngineStep]  # on the session's clock
    window: WindowResult
    session: MeasurementSession
    truth: Truth  # over the measured window
    power: StepPower
    gpu: Physics
    offset_s: float  # the trace's time 0 on the session's clock
    drift: Drift = Drift()

    def truth_between(self, t0: float, t1: float) -> Truth:
        """The truth over part of the window (a steady state, say), session-clock seconds."""
        return truth_of(self.trace, self.gpu, self.offset_s, t0, t1, self.drift)


@dataclass(frozen=True)
class Schedule:
    name: str
    requests: tuple[Request, ...]
    spec: EngineSpec


def open_loop(n: int, seed: int, rate_per_s: float = 20.0) -> Schedule:
    """Poisson arrivals, prompts of 32-512 tokens and 16-96 output tokens under a 512-token
    budget: steps of 10-30 ms on ``SimulatedGpu``."""
    rng = random.Random(seed)
    t, reqs = 0.0, []
    for i in range(n):
        t += rng.expovariate(rate_per_s)
        reqs.append(Request(i, t, rng.randint(32, 512), rng.randint(16, 96)))
    return Schedule("open loop", tuple(reqs), EngineSpec())


def chunked(n: int, seed: int) -> Schedule:
    """Prompts of 600-3000 tokens under a 256-token budget (every prompt chunked) and a KV cache
    small enough that requests are preempted and recomputed."""
    rng = random.Random(seed)
    t, reqs = 0.0, []
    for i in range(n):
        t += rng.expovariate(6.0)
        reqs.append(Request(i, t, rng.randint(600, 3000), rng.randint(16, 64)))
    return Schedule("chunked", tuple(reqs), EngineSpec(max_num_batched_tokens=256, kv_blocks=640))


def grid_phases(seed: int) -> tuple[float, float]:
    """Where the sensor's refresh grid lies for a seed (s, within one refresh window, drawn
    uniformly): after the session's clock starts (``measure``'s ``grid_phase_s``), and before
    the first step starts (added to ``lead_s``). A real sampler and a real engine keep no step
    with the board's refresh, so a figure checked at one phase only can be right by luck."""
    rng = random.Random(seed * 15485863)
    update = Sensor().update_s
    return rng.uniform(0.0, update), rng.uniform(0.0, update)


def trace_of(schedule: Schedule, gpu: Physics, seed: int = 0) -> Trace:
    return engine.run_engine(schedule.requests, schedule.spec, gpu, seed)


def truth_of(
    trace: Trace,
    gpu: Physics,
    offset_s: float,
    t0: float,
    t1: float,
    drift: Drift = Drift(),
) -> Truth:
    """The physics' own accounting of the steps (shifted by ``offset_s``) over ``[t0, t1]``: a
    step's parts count for the fraction of the step inside it (its power is constant but for the
    baseline's drift, whose energy in the step's part inside joins its parts in their
    proportions), the rest of ``[t0, t1]`` is between steps. Tokens: of the steps that end
    inside it."""
    power = step_power(trace, gpu, offset_s, drift)
    pre = dec = 0.0
    request: dict[int, float] = {}
    p_tokens = q_tokens = out_tokens = 0
    for step, work, sampled in zip(trace.steps, trace.work, trace.sampled, strict=True):
        a, b = float(step.start_s or 0.0) + offset_s, step.end_s + offset_s
        inside = max(min(b, t1) - max(a, t0), 0.0) / (b - a)
        if t0 < b <= t1:
            p_tokens += step.prefill_tokens or 0
            q_tokens += step.decode_tokens or 0
            out_tokens += sampled
        if inside <= 0:
            continue
        parts = gpu.parts(work)
        own = sum(p + q for p, q in parts)
        inside *= 1.0 + drift.energy_j(max(a, t0), min(b, t1)) / (inside * own) if own else 1.0
        for w, (p, q) in zip(work, parts, strict=True):
            pre, dec = pre + inside * p, dec + inside * q
            request[w.request_id] = request.get(w.request_id, 0.0) + inside * (p + q)
    window = power.energy(t0, t1)
    return Truth(window, pre, dec, window - pre - dec, request, p_tokens, q_tokens, out_tokens)


def step_power(trace: Trace, gpu: Physics, offset_s: float, drift: Drift = Drift()) -> StepPower:
    starts = [float(s.start_s or 0.0) + offset_s for s in trace.steps]
    ends = [s.end_s + offset_s for s in trace.steps]
    return StepPower(starts, ends, [gpu.power_w(w) for w in trace.work], gpu.idle_w, drift)


def sensed_gpu(power: Waveform, sensor: Sensor) -> FakeGpu:
    """An NVML double whose readings and energy counter are ``power`` as ``sensor`` shows it."""
    sensed = Sensed(
        power,
        sensor.update_s,
        sensor.sampled_fraction,
        lag_s=sensor.lag_s,
        jitter_s=sensor.jitter_s,
        seed=sensor.seed,
    )
    return FakeGpu(
        "GPU-simulated",
        power=sensed,
        counter_update_s=sensor.update_s,
        power_limit_mw=int(POWER_LIMIT_W * 1000),
    )


def measure(
    trace: Trace,
    gpu: Physics,
    *,
    sample_hz: float,
    sensor: Sensor = Sensor(),
    lead_s: float = 0.25,
    tail_s: float = 0.25,
    drift: Drift = Drift(),
    grid_phase_s: float = 0.0,
) -> Run:
    """``trace`` run on ``gpu`` under llem's measurement session at ``sample_hz`` (module
    docstring); ``drift``: the board's baseline drifting as it runs; ``grid_phase_s``: how far
    after one of the sensor's refresh instants the session's clock starts (its samples then fall
    that far into each refresh window at 10 Hz)."""
    clock = SteppingClock(CLOCK_START_S + grid_phase_s)
    window_start = clock.now() + 0.1
    offset = window_start + lead_s - float(trace.steps[0].start_s or 0.0)
    power = step_power(trace, gpu, offset, drift)
    fake = sensed_gpu(power, sensor)
    steps = [step_moved(s, offset) for s in trace.steps]
    session = measure_window(fake, clock, sample_hz=sample_hz, until_s=steps[-1].end_s + tail_s)
    w = session.last_window
    assert w is not None
    truth = truth_of(trace, gpu, offset, w.start_s, w.end_s, drift)
    return Run(trace, steps, w, session, truth, power, gpu, offset, drift)


__all__ = ["SimulatedGpu", "Run", "Schedule", "Sensor", "Truth", "chunked", "measure", "open_loop"]
