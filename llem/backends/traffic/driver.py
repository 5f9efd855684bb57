"""The one pacing driver both engines use: it sends each request at its time and gathers timelines.

An engine gives ``drive`` a ``submit`` coroutine function that hands one request to the engine,
streams its output and returns its ``RequestTimeline`` (the engine stamps ``sent_s`` itself, right
before the hand-over, on ``time.perf_counter``). The driver decides *when* ``submit`` is called:

- open loop and offline (every ``scheduled_s`` set): at ``start + scheduled_s``, whether or not
  earlier requests have finished;
- closed loop (``scheduled_s`` None): ``max_concurrency`` requests in flight, the next sent as soon
  as one finishes.

``arrival`` (the TTFT origin the driver passes to ``submit``) is the scheduled time for open loop
and offline traffic and the moment of sending for closed loop.

Precision. An asyncio sleep wakes late: the event loop hands epoll its timeout rounded up to a
whole millisecond, so ``asyncio.sleep`` alone sends up to about 1 ms late (AIPerf reports the same
quantisation above 500 requests/s). The driver therefore sleeps with the loop until ``precise_s``
before the due time and waits out the rest in a helper thread's ``time.sleep`` (nanosleep, tens
of microseconds), which wakes the loop through its self-pipe. Busy-yielding to the loop until the
due time was tried and dropped: it sends closer to the time at the median, but on a machine with
more runnable processes than cores the kernel queues a spinning process behind the others and its
p99 was worse (``bench/pacing.py --compare``), and a spin takes CPU from an engine on the machine.
The loop stays free while the thread waits, so an in-process engine's output handler (vLLM's
AsyncLLM) keeps running. ``precise_s=0`` paces with the loop's sleep alone.

Each request has a sender task, started ``LEAD_S`` before its due time, that waits and then
submits in the same step of the loop: a request due right after a late one waits on its own
instead of behind it, and no task is scheduled between the wake-up and the send. (Measured by
``bench/server_client.py``: the p99 send lateness at 100 requests/s went from 1.01 ms to 0.88 ms,
the median from 0.31 ms to 0.21 ms.) The thread's sleep ends at an absolute time, so the thread's
own start is not added to the wait.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from llem.vocabulary.workload import RequestTimeline, ScheduledRequest

#: submit(request, arrival_s) -> the request's timeline, once it has finished
Submit = Callable[[ScheduledRequest, float], Awaitable[RequestTimeline]]
ReadClock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]

#: How long before a due time the driver hands the rest of the wait to a precise sleep (seconds):
#: above the 1 ms rounding of the loop's epoll timeout, with room for a late wake-up.
PRECISE_S = 0.002
#: How long before its due time a request's sender starts waiting (seconds): requests due within
#: this of each other wait at once, so one sent late does not delay the next.
LEAD_S = 0.005


async def drive(
    requests: Sequence[ScheduledRequest],
    max_concurrency: int | None,
    submit: Submit,
    clock: ReadClock = time.perf_counter,
    sleep: Sleep = asyncio.sleep,
    precise_s: float = PRECISE_S,
    precise_sleep: Sleep | None = None,
) -> tuple[float, list[RequestTimeline]]:
    """Send every request as its traffic says; return (origin, timelines in request order).

    ``clock`` and ``sleep`` are the time source and the sleep the driver paces with (a test's
    virtual clock). Within ``precise_s`` of a due time the driver waits with ``precise_sleep``
    instead (default: ``time.sleep`` in a helper thread); ``precise_s=0``: ``sleep`` only.
    """
    start = clock()
    if requests and all(r.scheduled_s is None for r in requests):
        if max_concurrency is None or max_concurrency < 1:
            raise ValueError("closed-loop traffic needs max_concurrency >= 1")
        return start, await _closed_loop(requests, max_concurrency, submit, clock)
    if any(r.scheduled_s is None for r in requests):
        raise ValueError("a workload is either all scheduled (open loop) or all unscheduled")
    with ThreadPoolExecutor(1, thread_name_prefix="llem-pacing") as pool:
        if precise_sleep is None:
            precise_sleep = _thread_sleep(pool)
        wait = functools.partial(
            _until, clock=clock, sleep=sleep, precise_s=precise_s, precise_sleep=precise_sleep
        )
        tasks = []
        previous: asyncio.Event | None = None
        for request in sorted(requests, key=lambda r: (r.scheduled_s or 0.0, r.request_id)):
            due = start + (request.scheduled_s or 0.0)
            # the loop's sleep alone: the sender does the precise part of the wait
            await _until(due - LEAD_S, clock, sleep, 0.0, sleep)
            sent = asyncio.Event()
            sender = _send_at(due, request, submit, wait, previous, sent)
            tasks.append(asyncio.ensure_future(sender))
            previous = sent
        done = await asyncio.gather(*tasks)
    return start, sorted(done, key=lambda t: t.request_id)


async def _send_at(
    due: float,
    request: ScheduledRequest,
    submit: Submit,
    wait: Callable[[float], Awaitable[None]],
    after: asyncio.Event | None,
    sent: asyncio.Event,
) -> RequestTimeline:
    """Wait until ``due``, then submit ``request`` in the same step of the loop: no task of
    its own to schedule after the wait (each loop step between the wake-up and the send is one
    more batch of the other requests' stream events that the send waits behind). A request
    whose predecessor is not sent yet (both late, their wake-ups in one step in the other
    order) waits for it: requests are sent in the order of their times."""
    await wait(due)
    if after is not None and not after.is_set():
        await after.wait()
    sent.set()
    return await submit(request, due)


#: what is left of a wait below this is done (a float clock may never quite reach ``due``)
_CLOCK_GRAIN_S = 1e-9


async def _until(
    due: float, clock: ReadClock, sleep: Sleep, precise_s: float, precise_sleep: Sleep
) -> None:
    """Return once ``clock()`` has reached ``due``: ``sleep`` until ``precise_s`` before it,
    then ``precise_sleep`` the rest."""
    while (left := due - clock()) > _CLOCK_GRAIN_S:
        if left > precise_s + _CLOCK_GRAIN_S:
            await sleep(left - precise_s)
        else:
            await precise_sleep(left)


def _thread_sleep(pool: ThreadPoolExecutor) -> Sleep:
    """A sleep that waits in ``pool``'s thread (``time.sleep``: no millisecond rounding)."""

    async def precise_sleep(seconds: float) -> None:
        until = time.perf_counter() + seconds
        await asyncio.get_running_loop().run_in_executor(pool, _sleep_until, until)

    return precise_sleep


def _sleep_until(until: float) -> None:
    """Sleep until ``time.perf_counter()`` reaches ``until``: the thread's own start (a queue
    hand-over of about a tenth of a millisecond) is not added to the wait."""
    if (left := until - time.perf_counter()) > 0:
        time.sleep(left)


async def _closed_loop(
    requests: Sequence[ScheduledRequest], slots: int, submit: Submit, clock: ReadClock
) -> list[RequestTimeline]:
    queue = list(requests)
    queue.reverse()
    out: list[RequestTimeline] = []

    async def worker() -> None:
        while queue:
            request = queue.pop()
            out.append(await submit(request, clock()))

    await asyncio.gather(*(worker() for _ in range(min(slots, len(requests)))))
    return sorted(out, key=lambda t: t.request_id)
