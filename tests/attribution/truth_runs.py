"""llem's attribution of runs simulated by the truth harness (llem.testing.truth), for the tests
that check it against the harness's truth (which the physics makes, not llem)."""

from __future__ import annotations

from functools import cache

from llem.figures.attribution import Attribution
from llem.runner.attribution import attribute_window
from llem.testing.truth import harness as h
from llem.testing.truth.gpu import LinearGpu, SimulatedGpu

DEFAULT_HZ, FINE_HZ = 10.0, 1000.0
PART_TIME = h.Sensor(sampled_fraction=0.25)  # A100/H100 (arXiv 2312.02741)
FULL_TIME = h.Sensor(sampled_fraction=1.0)
LINEAR = LinearGpu()  # planted: 4 mJ per prefill token, 50 mJ per decode token, 120 W static


def attribute_run(run: h.Run) -> Attribution:
    w = run.window
    got = attribute_window(
        run.steps, w, run.session.source, w.start_s, w.end_s, ceiling_w=h.POWER_LIMIT_W
    )
    assert not isinstance(got, str), got
    return got[1]


@cache
def simulated(
    schedule: str, seed: int, hz: float, sensor: h.Sensor, linear: bool = False
) -> tuple[h.Run, Attribution]:
    """A schedule ("open loop": 96 requests, "chunked": 24) run on the non-linear GPU (or the
    linear one), measured at ``hz`` through ``sensor``, and llem's attribution of it."""
    gpu = LINEAR if linear else SimulatedGpu()
    plan = h.open_loop(96, seed) if schedule == "open loop" else h.chunked(24, seed)
    run = h.measure(h.trace_of(plan, gpu, seed), gpu, sample_hz=hz, sensor=sensor)
    return run, attribute_run(run)


@cache
def variant_run(
    name: str, seed: int, hz: float, window_s: float = 20.0
) -> tuple[h.Run, Attribution]:
    """A physics variant (llem.testing.truth.variants) run on its schedule for ``window_s`` of
    arrivals, measured at ``hz``, and llem's attribution of it."""
    from llem.testing.truth.variants import VARIANTS

    v = VARIANTS[name]
    run = v.run(v.schedule(seed, window_s), seed, sample_hz=hz)
    return run, attribute_run(run)
