"""The server's own view of the window: its Prometheus ``/metrics``, polled in the background.

Every ``poll_ms`` the scraper reads ``GET /metrics`` (Prometheus text format,
``llem.backends.server.prometheus``) and keeps one sample: requests running and waiting, and the
prompt and generation token counters (which metric holds what for each server:
``llem.backends.server.metric_names``). The deltas of the counters between polls are the tokens
each interval computed (what energy is attributed over); running over time is the achieved
concurrency.

A metric with several label sets (several engines, models or ranks) is summed. A server with no
``/metrics`` (404) gives a null result with the reason, as does one whose names are none of these.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from llem.backends.server.metric_names import FAMILIES, KNOWN_NAMES, MetricNames, detect_family
from llem.backends.server.prometheus import MetricsFormatError, parse_prometheus
from llem.errors import first_line


@dataclass(frozen=True)
class MetricsSample:
    """One poll: when it was answered (perf_counter seconds) and what the server said then."""

    t_s: float
    running: float | None
    waiting: float | None
    prompt_tokens_total: float | None
    generation_tokens_total: float | None
    requests_total: float | None = None  # finished requests, where the server counts them
    # speculative decoding's counters, where the server exports them (vLLM: with a method set)
    spec_drafts_total: float | None = None
    spec_draft_tokens_total: float | None = None
    spec_accepted_tokens_total: float | None = None
    # SGLang's speculative gauges at this poll (their scope: ``sglang_speculation``)
    spec_accept_length: float | None = None
    spec_accept_rate: float | None = None


def sample_of(values: Mapping[str, float], names: MetricNames, t_s: float) -> MetricsSample:
    def get(name: str | None) -> float | None:
        v = None if name is None else values.get(name)
        return None if v is None or math.isnan(v) else v

    return MetricsSample(
        t_s=t_s,
        running=get(names.running),
        waiting=get(names.waiting),
        prompt_tokens_total=get(names.prompt_tokens),
        generation_tokens_total=get(names.generation_tokens),
        requests_total=get(names.requests),
        spec_drafts_total=get(names.spec_drafts),
        spec_draft_tokens_total=get(names.spec_draft_tokens),
        spec_accepted_tokens_total=get(names.spec_accepted_tokens),
        spec_accept_length=get(names.spec_accept_length),
        spec_accept_rate=get(names.spec_accept_rate),
    )


@dataclass(frozen=True)
class TokenInterval:
    """Tokens the server's counters grew by between two polls (None where a counter is absent)."""

    start_s: float
    end_s: float
    prompt_tokens: float | None
    generation_tokens: float | None


@dataclass(frozen=True)
class ServerMetrics:
    """The window's samples, or none with the reason (``family`` None: no metrics read)."""

    family: str | None
    poll_ms: float
    samples: tuple[MetricsSample, ...] = ()
    reason: str | None = None  # why there are no samples, or why some polls failed
    failed_polls: int = 0
    polls: int = 0  # GETs sent and answered or failed (one cancelled by the stop is not)

    def intervals(self) -> list[TokenInterval]:
        """Counter deltas between consecutive samples."""

        def delta(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else b - a

        pairs = itertools.pairwise(self.samples)
        return [
            TokenInterval(
                a.t_s,
                b.t_s,
                delta(a.prompt_tokens_total, b.prompt_tokens_total),
                delta(a.generation_tokens_total, b.generation_tokens_total),
            )
            for a, b in pairs
        ]


@dataclass
class _Polls:
    samples: list[MetricsSample] = field(default_factory=list)
    family: str | None = None
    reason: str | None = None
    failed: int = 0
    sent: int = 0
    absent: bool = False  # /metrics answered 404 (or names no family): stop polling


class MetricsScraper:
    """Polls ``base_url/metrics`` every ``poll_ms`` on the running loop between ``start`` and
    ``stop`` (or as ``async with``: stopped on every way out of the block, an exception or a
    cancellation (Ctrl-C under ``asyncio.run``) included); ``stop`` returns the
    ``ServerMetrics``."""

    def __init__(
        self,
        base_url: str,
        poll_ms: float = 100.0,
        session: Any = None,
        timeout_s: float = 5.0,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.url = base_url.rstrip("/") + "/metrics"
        self.poll_ms = poll_ms
        self.session = session
        self.timeout_s = timeout_s
        self.clock = clock
        self._own_session = session is None
        self._task: asyncio.Task[None] | None = None
        self._polls = _Polls()
        self.result: ServerMetrics | None = None  # set on leaving ``async with``

    async def start(self) -> None:
        if self.session is None:
            import aiohttp

            self.session = aiohttp.ClientSession()
        try:
            await self.poll_once()  # the window's first sample, before any traffic
        except BaseException:  # cancelled (Ctrl-C) or failed before polling began
            await self.stop(final_poll=False)
            raise
        self._task = asyncio.ensure_future(self._loop())

    async def _loop(self) -> None:
        while not self._polls.absent:
            await asyncio.sleep(self.poll_ms / 1000)
            await self.poll_once()

    async def poll_once(self) -> None:
        """Read /metrics once and keep its sample (or count the failure)."""
        import aiohttp

        polls = self._polls
        if polls.absent:
            return
        polls.sent += 1
        try:
            timeout = aiohttp.ClientTimeout(total=self.timeout_s)
            async with self.session.get(self.url, timeout=timeout) as r:
                status, text = r.status, await r.text(errors="replace")
        except (aiohttp.ClientError, asyncio.TimeoutError) as e:
            polls.failed += 1
            polls.reason = f"GET {self.url} failed {polls.failed} time(s), last: {e or type(e)}"
            return
        except asyncio.CancelledError:  # stopped while this GET was out: not one of the polls
            polls.sent -= 1
            raise
        t_s = self.clock()
        if status == 404:
            polls.absent = True
            polls.reason = f"GET {self.url} answered 404: the server exposes no Prometheus metrics"
            return
        if status != 200:
            polls.failed += 1
            polls.reason = f"GET {self.url} answered HTTP {status} {polls.failed} time(s)"
            return
        try:
            values = parse_prometheus(text, KNOWN_NAMES)
        except MetricsFormatError as e:
            polls.failed += 1
            polls.reason = f"{e.message} ({polls.failed} poll(s) unreadable)"
            return
        self._take(values, t_s)

    def _take(self, values: dict[str, float], t_s: float) -> None:
        polls = self._polls
        if polls.family is None:
            polls.family = detect_family(values)
            if polls.family is None:
                polls.absent = True
                polls.reason = (
                    f"{self.url} carries none of the known servers' metrics "
                    f"({', '.join(f.running for f in FAMILIES.values())})"
                )
                return
        polls.samples.append(sample_of(values, FAMILIES[polls.family], t_s))

    async def stop(self, final_poll: bool = True) -> ServerMetrics:
        """Stop polling (with ``final_poll``, one last sample first: the window's end, after the
        traffic) and return what was read. The session llem opened is closed on every way out."""
        try:
            if self._task is not None:
                task, self._task = self._task, None
                task.cancel()
                (ended,) = await asyncio.gather(task, return_exceptions=True)
                if isinstance(ended, Exception):  # the polls stopped early: say why
                    self._polls.reason = f"the scrape stopped early: {first_line(ended)}"
                if final_poll:
                    await self.poll_once()
        finally:
            if self._own_session and self.session is not None:
                session, self.session = self.session, None
                await session.close()
        polls = self._polls
        return ServerMetrics(
            family=polls.family if polls.samples else None,
            poll_ms=self.poll_ms,
            samples=tuple(polls.samples),
            reason=polls.reason if polls.reason or polls.samples else "no poll answered",
            failed_polls=polls.failed,
            polls=polls.sent,
        )

    async def __aenter__(self) -> MetricsScraper:
        await self.start()
        return self

    async def __aexit__(self, exc_type: object, *exc: object) -> None:
        # leaving on an exception or a cancellation: stop at once, no last poll
        self.result = await self.stop(final_poll=exc_type is None)
