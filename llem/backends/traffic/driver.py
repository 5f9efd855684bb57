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
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence

from llem.backends.types import RequestTimeline, ScheduledRequest

#: submit(request, arrival_s) -> the request's timeline, once it has finished
Submit = Callable[[ScheduledRequest, float], Awaitable[RequestTimeline]]
Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


async def drive(
    requests: Sequence[ScheduledRequest],
    max_concurrency: int | None,
    submit: Submit,
    clock: Clock = time.perf_counter,
    sleep: Sleep = asyncio.sleep,
) -> tuple[float, list[RequestTimeline]]:
    """Send every request as its traffic says; return (origin, timelines in request order)."""
    start = clock()
    if requests and all(r.scheduled_s is None for r in requests):
        if max_concurrency is None or max_concurrency < 1:
            raise ValueError("closed-loop traffic needs max_concurrency >= 1")
        return start, await _closed_loop(requests, max_concurrency, submit, clock)
    if any(r.scheduled_s is None for r in requests):
        raise ValueError("a workload is either all scheduled (open loop) or all unscheduled")
    tasks = []
    for request in sorted(requests, key=lambda r: (r.scheduled_s or 0.0, r.request_id)):
        due = start + (request.scheduled_s or 0.0)
        wait = due - clock()
        if wait > 0:
            await sleep(wait)
        tasks.append(asyncio.ensure_future(submit(request, due)))
    done = await asyncio.gather(*tasks)
    return start, sorted(done, key=lambda t: t.request_id)


async def _closed_loop(
    requests: Sequence[ScheduledRequest], slots: int, submit: Submit, clock: Clock
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
