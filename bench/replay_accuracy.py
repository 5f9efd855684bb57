"""How exactly does the replay source measure energy over real windows?

Writes synthetic power traces (step, square wave, ramp, noisy) as replay CSVs, plays each through
a ``MeasurementSession(energy=replay)`` over a real window of ``--window-s`` seconds on the wall
clock, and prints the measured joules against the analytic energy of the same trace over the same
window, with the relative error. The replay source integrates the trace exactly, so the error
should be at floating-point level (target: largest relative error <= 1e-6, met / NOT met at the
end; exit status 1 when not met). For contrast it also prints what integrating the sampler's own
samples (the trapezoid at ``--hz``, as the ``nvml_power`` fallback does) would have given.

    python bench/replay_accuracy.py
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from _verdict import Target, report

Points = list[tuple[float, float]]
#: the replay source integrates the trace exactly: anything above floating-point noise is a bug
MAX_REL_ERROR = 1e-6


def step_trace(total_s: float):
    from llem.testing.fake_pynvml import Step

    w = Step(100.0, 250.0, at_s=1.37)
    pts = [(0.0, 100.0), (1.37, 100.0), (1.37, 250.0), (total_s, 250.0)]
    return pts, w.energy


def square_trace(total_s: float):
    from llem.testing.fake_pynvml import Square

    w = Square(80.0, 300.0, period_s=0.46, phase_s=0.0)
    pts: Points = [(0.0, w.power(0.0))]
    k = 1
    while k * 0.23 < total_s:
        t = k * 0.23
        pts += [(t, w.power(t - 1e-9)), (t, w.power(t))]
        k += 1
    pts.append((total_s, w.power(total_s)))
    return pts, w.energy


def ramp_trace(total_s: float):
    from llem.testing.fake_pynvml import Ramp

    w = Ramp(60.0, 360.0, t0=0.9, t1=2.4)
    pts = [(0.0, 60.0), (0.9, 60.0), (2.4, 360.0), (total_s, 360.0)]
    return pts, w.energy


def noisy_trace(total_s: float):
    """200 W plus uniform noise of +-60 W, a point every 10 ms; reference: dense numeric."""
    import numpy as np

    rng = random.Random(7)
    pts = [(i * 0.01, 200.0 + rng.uniform(-60.0, 60.0)) for i in range(int(total_s / 0.01) + 1)]
    ts = np.array([p[0] for p in pts])
    ps = np.array([p[1] for p in pts])

    def reference(a: float, b: float) -> float:
        grid = np.linspace(a, b, 2_000_001)
        return float(np.trapezoid(np.interp(grid, ts, ps), grid))

    return pts, reference


TRACES: list[tuple[str, Callable]] = [
    ("step", step_trace),
    ("square", square_trace),
    ("ramp", ramp_trace),
    ("noisy", noisy_trace),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--window-s", type=float, default=2.0)
    ap.add_argument("--idle-s", type=float, default=0.5)
    ap.add_argument("--hz", type=float, default=10.0)
    args = ap.parse_args()

    from llem.config.schema import EnergySource, MeasurementConfig
    from llem.measure import MeasurementSession
    from llem.measure.integrate import integrate_linear

    total = args.idle_s + 0.2 + args.window_s + 2.0
    print(
        f"replay source, real windows of {args.window_s:g} s (after a {args.idle_s:g} s idle "
        f"baseline), sampler at {args.hz:g} Hz\n"
    )
    header = (
        f"{'trace':8} {'window s':>9} {'measured J':>12} {'analytic J':>12} "
        f"{'rel error':>10} {'idle W':>8} | {'10 Hz trapezoid J':>17} {'its error':>9}"
    )
    print(header)
    print("-" * len(header))
    errors: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, build in TRACES:
            pts, analytic = build(total)
            path = Path(tmp) / f"{name}.csv"
            with path.open("w", newline="") as fh:
                out = csv.writer(fh)
                out.writerow(["time_s", "device", "power_w"])
                out.writerows([f"{t:.6f}", f"synthetic-{name}", f"{p:.6f}"] for t, p in pts)
            cfg = MeasurementConfig(
                energy=EnergySource.replay,
                replay_trace=str(path),
                idle_baseline_s=args.idle_s,
                sample_hz=args.hz,
                min_window_s=args.window_s,
            )
            session = MeasurementSession(cfg, None, "cpu")
            assert session.preflight() == [], session.preflight()
            session.start()
            session.clock.sleep(0.2)
            with session.window() as w:
                session.clock.sleep(args.window_s)
            rep = session.measurement(output_tokens=1, requests=1)
            session.close()
            measured = rep.energy.total_j
            exact = analytic(w.start_s, w.end_s)
            errors.append(abs(measured - exact) / exact)
            samples = session.last_window.samples
            times = [s.time_s - session.origin_s for s in samples]
            trap = integrate_linear(times, [s.power_w for s in samples], w.start_s, w.end_s)
            print(
                f"{name:8} {rep.energy.window_s:9.4f} {measured:12.4f} {exact:12.4f} "
                f"{(measured - exact) / exact:10.2e} {rep.energy.idle_power_w:8.2f} | "
                f"{trap:17.4f} {(trap - exact) / exact:9.2%}"
            )
    print("\nmeasured = replay source (exact piecewise-linear integral over the window);")
    print("analytic = closed form of the waveform (noisy: dense numeric integral of the trace).")
    worst = Target("replay source, largest |relative error|", max(errors), "<=", MAX_REL_ERROR)
    ok = report([worst])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
