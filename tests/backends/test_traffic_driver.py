"""The pacing driver against a virtual clock: an event loop whose time moves only when it waits.

``VirtualLoop`` is asyncio's own selector loop with its clock replaced: when the loop would block
for ``timeout`` seconds it advances its clock instead, rounded up to ``quantum_s`` as epoll rounds
a real loop's timeout up to a whole millisecond, and every turn of the loop costs ``turn_s``. So
``asyncio.sleep`` wakes late exactly as it does for real, deterministically, and the tests run in
milliseconds. The driver's precise sleep (a thread's ``time.sleep`` until a time, for real) is
``exact_sleep``: it lets the loop run the tasks that are ready, then moves the virtual clock to
the time it was asked to wake at (where no other wait has moved it past).
"""

from __future__ import annotations

import asyncio
import math
import selectors
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from llem.backends.traffic.driver import _thread_sleep, drive
from llem.vocabulary.workload import Prompt, RequestTimeline, ScheduledRequest


class _VirtualSelector(selectors.SelectSelector):
    def __init__(self, loop: VirtualLoop) -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list:  # type: ignore[override]
        if timeout is None:
            raise RuntimeError("the loop would wait forever: nothing is scheduled")
        self._loop.advance(timeout)
        return []


class VirtualLoop(asyncio.SelectorEventLoop):
    def __init__(self, quantum_s: float = 0.001, turn_s: float = 1e-6) -> None:
        self.now = 1000.0
        self.quantum_s, self.turn_s = quantum_s, turn_s
        super().__init__(_VirtualSelector(self))

    def time(self) -> float:
        return self.now

    def advance(self, timeout: float) -> None:
        if timeout > 0 and self.quantum_s:
            timeout = math.ceil(timeout / self.quantum_s) * self.quantum_s
        self.now += timeout + self.turn_s


def exact_sleep(loop: VirtualLoop):
    async def sleep(seconds: float) -> None:
        until = loop.now + seconds  # like the driver's thread, it wakes at a time, not after
        await asyncio.sleep(0)  # like a thread's sleep, other tasks run while it waits
        loop.now = max(loop.now, until)

    return sleep


def _run(coro, loop: VirtualLoop | None = None):
    loop = loop or VirtualLoop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


def _requests(times: list[float | None]) -> list[ScheduledRequest]:
    return [ScheduledRequest(i, i, Prompt(text=f"p{i}"), t) for i, t in enumerate(times)]


class FakeEngine:
    """submit(): stamps the send on the virtual clock, 'runs' for durations[i], tracks in-flight."""

    def __init__(self, durations: list[float] | None = None) -> None:
        self.durations = durations
        self.in_flight = 0
        self.max_in_flight = 0
        self.finished_at: list[float] = []

    async def submit(self, request: ScheduledRequest, arrival_s: float) -> RequestTimeline:
        loop = asyncio.get_running_loop()
        sent = loop.time()
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        await asyncio.sleep(self.durations[request.request_id] if self.durations else 0.005)
        self.in_flight -= 1
        self.finished_at.append(loop.time())
        return RequestTimeline(
            request.request_id, request.prompt_index, arrival_s, None, sent, [loop.time()], [1], 3
        )


def _drive(loop: VirtualLoop, requests, engine: FakeEngine, n=None, **kw):
    kw.setdefault("precise_sleep", exact_sleep(loop))
    return _run(drive(requests, n, engine.submit, clock=loop.time, **kw), loop)


def test_open_loop_sends_each_request_at_its_time_in_order_despite_a_quantised_sleep():
    times = [0.0, 0.0104, 0.0137, 0.0500, 0.0503, 0.2]
    loop = VirtualLoop(quantum_s=0.001)
    start, out = _drive(loop, _requests(times), FakeEngine())
    assert [t.request_id for t in out] == list(range(len(times)))
    assert [t.arrival_s - start for t in out] == pytest.approx(times, abs=1e-9)
    lateness = [t.sent_s - t.arrival_s for t in out]
    assert all(0 <= late < 1e-4 for late in lateness), lateness
    assert sorted(out, key=lambda t: t.sent_s) == out  # sent in schedule order


def test_without_the_precise_sleep_a_quantised_sleep_sends_late():
    """The failure the precise sleep exists for: the loop's sleep alone is late by up to 1 ms."""
    times = [0.0, 0.0104, 0.0137, 0.0500]
    loop = VirtualLoop(quantum_s=0.001)
    _, out = _drive(loop, _requests(times), FakeEngine(), precise_s=0.0)
    assert max(t.sent_s - t.arrival_s for t in out) > 5e-4


def test_requests_out_of_order_are_sent_by_time_and_returned_by_id():
    loop = VirtualLoop()
    _, out = _drive(loop, _requests([0.03, 0.01, 0.02]), FakeEngine())
    assert [t.request_id for t in out] == [0, 1, 2]
    assert out[1].sent_s < out[2].sent_s < out[0].sent_s


def test_open_loop_does_not_wait_for_earlier_requests_to_finish():
    engine = FakeEngine(durations=[1.0, 1.0, 1.0])
    loop = VirtualLoop()
    start, out = _drive(loop, _requests([0.0, 0.1, 0.2]), engine)
    assert [t.sent_s - start for t in out] == pytest.approx([0.0, 0.1, 0.2], abs=1e-4)
    assert engine.max_in_flight == 3


def test_offline_sends_everything_at_the_origin():
    engine = FakeEngine()
    loop = VirtualLoop()
    start, out = _drive(loop, _requests([0.0] * 8), engine)
    assert {t.arrival_s for t in out} == {start}
    assert max(t.sent_s for t in out) - start < 1e-4
    assert engine.max_in_flight == 8


def test_closed_loop_keeps_exactly_n_in_flight_and_sends_the_next_as_one_finishes():
    durations = [0.05, 0.02, 0.09, 0.03, 0.04, 0.01, 0.07, 0.02, 0.06, 0.03]
    engine = FakeEngine(durations)
    loop = VirtualLoop()
    start, out = _drive(loop, _requests([None] * len(durations)), engine, n=3)
    assert engine.max_in_flight == 3
    assert [t.request_id for t in out] == list(range(10))
    sends = sorted(t.sent_s for t in out)
    assert sends[:3] == pytest.approx([start] * 3, abs=1e-4)
    # every later send is the moment an earlier request finished (each finish frees one slot)
    assert sends[3:] == pytest.approx(sorted(engine.finished_at)[:7], abs=1e-4)
    assert all(t.arrival_s == t.sent_s for t in out)  # closed loop: TTFT from the actual send


def test_closed_loop_with_more_slots_than_requests():
    engine = FakeEngine()
    loop = VirtualLoop()
    _, out = _drive(loop, _requests([None] * 2), engine, n=5)
    assert len(out) == 2 and engine.max_in_flight == 2


def test_closed_loop_needs_a_concurrency():
    with pytest.raises(ValueError, match="max_concurrency"):
        _drive(VirtualLoop(), _requests([None]), FakeEngine(), n=None)


def test_a_mixed_workload_is_refused():
    with pytest.raises(ValueError, match="all scheduled"):
        _drive(VirtualLoop(), _requests([0.0, None]), FakeEngine())


def test_an_empty_workload_returns_no_timelines():
    engine = FakeEngine()
    loop = VirtualLoop()
    start, out = _drive(loop, [], engine, n=4)
    assert out == [] and start == pytest.approx(1000.0)
    assert _drive(VirtualLoop(), [], FakeEngine())[1] == []


def test_on_the_real_clock_no_request_is_sent_early_and_the_order_holds():
    times = [i * 0.002 for i in range(40)]  # 500 requests/s
    engine = FakeEngine(durations=[0.001] * 40)

    async def submit(request: ScheduledRequest, arrival_s: float) -> RequestTimeline:
        timeline = await engine.submit(request, arrival_s)
        timeline.sent_s = sent[request.request_id]
        return timeline

    sent: dict[int, float] = {}

    async def stamping(request: ScheduledRequest, arrival_s: float) -> RequestTimeline:
        sent[request.request_id] = time.perf_counter()
        return await submit(request, arrival_s)

    start, out = asyncio.run(drive(_requests(times), None, stamping))
    assert all(t.sent_s >= t.arrival_s for t in out)
    assert [t.arrival_s - start for t in out] == pytest.approx(times)
    assert sorted(out, key=lambda t: t.sent_s) == out


def test_a_wait_ends_when_every_sleep_lands_a_hair_short_of_its_time() -> None:
    """A virtual clock whose float sums land one ulp short of what was asked: the driver must
    still send (a wait of under a nanosecond is done), not sleep ever smaller amounts forever."""
    now = [1000.1]

    async def sleep(seconds: float) -> None:
        now[0] = math.nextafter(now[0] + seconds, -math.inf)

    async def submit(request: ScheduledRequest, arrival: float) -> RequestTimeline:
        return RequestTimeline(request.request_id, 0, arrival, arrival, now[0], [now[0]], [1], 1)

    requests = [ScheduledRequest(i, 0, Prompt(text="a"), 0.01 * i) for i in range(3)]
    coro = drive(requests, None, submit, clock=lambda: now[0], sleep=sleep, precise_sleep=sleep)
    _, done = asyncio.run(coro)
    assert [t.arrival_s for t in done] == pytest.approx([1000.1, 1000.11, 1000.12], abs=1e-9)
    assert now[0] >= 1000.12 - 1e-9  # it waited for the last send time


def test_a_request_is_submitted_in_the_loop_step_in_which_its_wait_ends() -> None:
    """No loop step between a request's wake-up and its ``submit`` (each step is one more batch of
    the other requests' events that the send waits behind): a callback planted as the precise
    sleep returns has not run when ``submit`` is called."""
    loop = VirtualLoop(quantum_s=0.001)
    sleep = exact_sleep(loop)
    planted: list[list[int]] = []
    unrun_at_submit: list[bool] = []

    async def precise(seconds: float) -> None:
        await sleep(seconds)
        mark: list[int] = []
        loop.call_soon(mark.append, 1)
        planted.append(mark)

    async def submit(request: ScheduledRequest, arrival_s: float) -> RequestTimeline:
        unrun_at_submit.append(not planted[-1])
        return await FakeEngine().submit(request, arrival_s)

    times = [0.0104, 0.0207, 0.0305]  # each a wait that ends in the precise sleep
    _run(drive(_requests(times), None, submit, clock=loop.time, precise_sleep=precise), loop)
    assert unrun_at_submit == [True, True, True]


def test_the_threads_sleep_ends_at_its_time_when_the_thread_starts_late() -> None:
    """The precise sleep wakes at the time it was asked for: a thread that starts it late (busy
    with an earlier wait) does not add its delay to the wait."""
    with ThreadPoolExecutor(1) as pool:
        precise = _thread_sleep(pool)

        async def go() -> float:
            asyncio.get_running_loop().run_in_executor(pool, time.sleep, 0.2)  # the thread busy
            t0 = time.perf_counter()
            await precise(0.3)
            return time.perf_counter() - t0

        took = asyncio.run(go())
    assert 0.3 <= took < 0.45, took  # not 0.5: the thread's 0.2 s of other work is not added


def test_a_request_whose_wait_ends_before_its_late_predecessors_is_sent_after_it() -> None:
    """The first request's wait ends 10 ms late (a stalled wake-up), after the second's: the
    second is still sent after the first, right after it."""
    loop = VirtualLoop(quantum_s=0.001)
    exact = exact_sleep(loop)
    calls: list[float] = []

    async def precise(seconds: float) -> None:
        calls.append(seconds)
        if len(calls) == 1:
            await asyncio.sleep(seconds + 0.010)  # the first wake-up comes 10 ms late
        else:
            await exact(seconds)

    engine = FakeEngine()
    requests = _requests([0.0104, 0.0124])
    start, out = _run(
        drive(requests, None, engine.submit, clock=loop.time, precise_sleep=precise), loop
    )
    first, second = out
    assert first.sent_s - start >= 0.0204  # late, as planted
    assert first.sent_s <= second.sent_s < first.sent_s + 1e-4
