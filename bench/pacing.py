"""Pacing precision of llem's serving driver: how late each request is sent.

A fake engine (its ``submit`` stamps the send on ``time.perf_counter``, awaits a short sleep as a
streaming request would, and returns a timeline) is driven through ``llem.backends.traffic.drive``
with Poisson arrivals (``traffic.seed``) at 10, 100 and 1,000 requests/s. Lateness is actual send
minus scheduled send; p50, p99 and max are printed per rate, then the verdict on the issue's goal
(p99 <= 1 ms at 100 requests/s). ``--compare`` repeats each rate with the two alternatives the
driver does not use: ``sleep`` (asyncio.sleep alone, ``precise_s=0``) and ``spin`` (yielding to the
loop until the due time instead of the driver's thread sleep). The machine's own floor is printed
first: how late a bare ``time.sleep`` wakes, with nothing else in the process.

    .venv/bin/python bench/pacing.py
    .venv/bin/python bench/pacing.py --seconds 5 --compare
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from _verdict import Target, report

from llem.backends.traffic.driver import PRECISE_S, drive
from llem.backends.traffic.schedule import build_schedule
from llem.config.traffic import TrafficConfig, TrafficKind
from llem.vocabulary.workload import Prompt, RequestTimeline, ScheduledRequest

RATES = (10.0, 100.0, 1000.0)
TARGET_RATE, TARGET_P99_MS = 100.0, 1.0


async def _submit(request: ScheduledRequest, arrival_s: float) -> RequestTimeline:
    sent = time.perf_counter()
    await asyncio.sleep(0.005)  # the request "streams" for 5 ms
    return RequestTimeline(
        request.request_id,
        request.prompt_index,
        arrival_s,
        arrival_s,
        sent,
        [time.perf_counter()],
        [1],
        1,
    )


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


async def _spin(seconds: float) -> None:
    due = time.perf_counter() + seconds
    while time.perf_counter() < due:
        await asyncio.sleep(0)


#: mode -> drive's keyword arguments
MODES: dict[str, dict[str, object]] = {
    "driver": {},
    "sleep": {"precise_s": 0.0},
    "spin": {"precise_s": PRECISE_S, "precise_sleep": _spin},
}


def _schedule(rate: float, n: int, seed: int) -> list[ScheduledRequest]:
    traffic = TrafficConfig(kind=TrafficKind.poisson, rate_per_s=rate, n_requests=n, seed=seed)
    return build_schedule(traffic, [Prompt(text="x")])


def lateness_ms(rate: float, n: int, seed: int, mode: str = "driver") -> list[float]:
    requests = _schedule(rate, n, seed)
    _, timelines = asyncio.run(drive(requests, None, _submit, **MODES[mode]))  # type: ignore[arg-type]
    return [(t.sent_s - t.arrival_s) * 1e3 for t in timelines]


def floor_ms(rate: float, n: int, seed: int) -> list[float]:
    """How late a bare time.sleep wakes for the same gaps: the machine's own scheduling noise."""
    times = [r.scheduled_s or 0.0 for r in _schedule(rate, n, seed)]
    late = []
    for gap in (b - a for a, b in zip(times, times[1:], strict=False)):
        t0 = time.perf_counter()
        time.sleep(gap)
        late.append((time.perf_counter() - t0 - gap) * 1e3)
    return late


def _row(rate: float, mode: str, late: list[float]) -> str:
    p50, p99 = _percentile(late, 0.5), _percentile(late, 0.99)
    return f"{rate:8g} {mode:>7} {len(late):9d} {p50:8.3f} {p99:8.3f} {max(late):8.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="workload length per rate")
    parser.add_argument("--min-requests", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compare", action="store_true", help="also run with spin_s=0")
    args = parser.parse_args()
    modes = list(MODES) if args.compare else ["driver"]
    print(f"{'rate/s':>8} {'mode':>7} {'requests':>9} {'p50_ms':>8} {'p99_ms':>8} {'max_ms':>8}")
    print(_row(TARGET_RATE, "floor", floor_ms(TARGET_RATE, int(TARGET_RATE * 5), args.seed)))
    p99_at_target = None
    for rate in RATES:
        n = max(args.min_requests, int(rate * args.seconds))
        for mode in modes:
            late = lateness_ms(rate, n, args.seed, mode)
            print(_row(rate, mode, late))
            if rate == TARGET_RATE and mode == "driver":
                p99_at_target = _percentile(late, 0.99)
    assert p99_at_target is not None
    target = Target(
        f"send lateness p99 at {TARGET_RATE:g} req/s", p99_at_target, "<=", TARGET_P99_MS, " ms"
    )
    sys.exit(0 if report([target]) else 1)


if __name__ == "__main__":
    main()
