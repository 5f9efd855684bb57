"""A draft phase for the truth harness: speculative decoding's steps on the simulated GPU, each a
draft (proposing ``k`` tokens) then its verification (the target's pass over them), read through
the NVML-like sensor by llem's real measurement session on a virtual clock, with the truth of the
draft's and the verification's energy from the planted powers alone.

    trace = speculate(seed=3)                     # k varies between requests
    run = measure_draft(trace, DraftGpu(), sample_hz=10.0)
    run.draft_j, run.verification_j, run.spans, run.window

``DraftGpu`` (not the model llem fits): a draft of ``k`` tokens lasts ``draft_fixed_s + k x
draft_token_s`` at ``draft_w``; its verification ``verify_fixed_s + k x verify_token_s`` at
``verify_w``; the bookkeeping between a verification and the next draft ``gap_s``, and the
time between requests ``request_gap_s``, at ``idle_w``. Each request holds its own ``k`` (a
prompt that prompt lookup matches well proposes more than one it does not), so the mix of
drafting and verifying varies across the window; ``speculate(k_choices=(4,))`` holds one ``k``
throughout and no request gap, so every interval holds the same mix.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from llem.measure import MeasurementSession
from llem.measure.meter import WindowResult
from llem.testing.clocks import SteppingClock
from llem.testing.truth.harness import CLOCK_START_S, Sensor, sensed_gpu
from llem.testing.truth.sensor import StepPower
from llem.testing.virtual_window import measure_window
from llem.vocabulary.speculation import DraftSpans, Span

TRUTH_CLOCK = "the truth harness's virtual clock"


@dataclass(frozen=True)
class DraftGpu:
    draft_w: float = 260.0  # a draft model's forward passes
    verify_w: float = 430.0  # the target's verification pass
    idle_w: float = 70.0
    draft_fixed_s: float = 0.001
    draft_token_s: float = 0.003
    verify_fixed_s: float = 0.016
    verify_token_s: float = 0.0012
    gap_s: float = 0.0008
    request_gap_s: float = 0.03


@dataclass(frozen=True)
class DraftTrace:
    """Each step's k, and the request each step belongs to, from time 0 of the trace."""

    k: tuple[int, ...]
    request: tuple[int, ...]


@dataclass(frozen=True)
class DraftRun:
    spans: DraftSpans  # on the session's clock
    window: WindowResult
    session: MeasurementSession
    draft_j: float  # the truth over the window: the planted draft power x its seconds
    verification_j: float
    window_j: float


def speculate(
    seed: int,
    n_requests: int = 14,
    k_choices: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8),
    steps: tuple[int, int] = (10, 40),
) -> DraftTrace:
    """Requests of ``steps`` verification steps each, each request's ``k`` drawn from
    ``k_choices`` (seeded)."""
    rng = random.Random(seed)
    ks: list[int] = []
    request: list[int] = []
    for r in range(n_requests):
        k = rng.choice(k_choices)
        n = rng.randint(*steps)
        ks += [k] * n
        request += [r] * n
    return DraftTrace(tuple(ks), tuple(request))


def draft_timeline(
    trace: DraftTrace, gpu: DraftGpu, origin_s: float
) -> tuple[list[Span], list[Span]]:
    """The drafts' and the verifications' spans from ``origin_s``: a request gap before each
    request but the first (none where one request's steps follow another's without one:
    ``request_gap_s`` 0)."""
    draft: list[Span] = []
    verify: list[Span] = []
    t = origin_s
    for i, (k, r) in enumerate(zip(trace.k, trace.request, strict=True)):
        if i and r != trace.request[i - 1]:
            t += gpu.request_gap_s
        elif i:
            t += gpu.gap_s
        end = t + gpu.draft_fixed_s + k * gpu.draft_token_s
        draft.append((t, end))
        t = end + gpu.verify_fixed_s + k * gpu.verify_token_s
        verify.append((end, t))
    return draft, verify


def measure_draft(
    trace: DraftTrace,
    gpu: DraftGpu,
    *,
    sample_hz: float,
    sensor: Sensor = Sensor(),
    lead_s: float = 0.25,
    tail_s: float = 0.25,
    grid_phase_s: float = 0.0,
) -> DraftRun:
    """``trace`` run on ``gpu`` under llem's measurement session at ``sample_hz``: the steps
    start ``lead_s`` after the window opens and the window closes ``tail_s`` after the last;
    the session's clock starts ``grid_phase_s`` after one of the sensor's refresh instants
    (``harness.grid_phases`` draws both per seed)."""
    clock = SteppingClock(CLOCK_START_S + grid_phase_s)
    window_start = clock.now() + 0.1
    draft, verify = draft_timeline(trace, gpu, window_start + lead_s)
    spans = sorted(
        [(a, b, gpu.draft_w) for a, b in draft] + [(a, b, gpu.verify_w) for a, b in verify]
    )
    power = StepPower(
        [a for a, _, _ in spans], [b for _, b, _ in spans], [w for *_, w in spans], gpu.idle_w
    )
    fake = sensed_gpu(power, sensor)
    session = measure_window(fake, clock, sample_hz=sample_hz, until_s=verify[-1][1] + tail_s)
    w = session.last_window
    assert w is not None
    return DraftRun(
        DraftSpans(tuple(draft), tuple(verify), TRUTH_CLOCK),
        w,
        session,
        gpu.draft_w * sum(b - a for a, b in draft),
        gpu.verify_w * sum(b - a for a, b in verify),
        power.energy(w.start_s, w.end_s),
    )
