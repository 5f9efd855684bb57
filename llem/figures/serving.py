"""Serving figures from request timelines: per-request latency, concurrency, the requests and
tokens within a span, and goodput. Pure functions over ``RequestTimeline`` lists
(``llem.vocabulary``); no engine. The steady state, the part of the window these figures are
also read over, is ``llem.figures.steady_state``'s.

Per request (every time on the run's one clock, ``time.perf_counter`` seconds), the figures
published as ``ttft_ms``, ``itl_ms``, ``tpot_ms`` and ``e2e_ms`` follow vLLM's ``bench serve``
(``vllm/benchmarks/lib/endpoint_request_func.py``: ``st = time.perf_counter()`` when the request
is sent, ``output.ttft = timestamp - st`` at the first chunk whose ``choices`` are not empty, its
text empty or not, ``output.itl.append(timestamp -
most_recent_timestamp)`` at every later chunk, ``output.latency = most_recent_timestamp - st``;
``vllm/benchmarks/serve.py``, ``calculate_metrics``: ``tpot = (latency - ttft) /
(output_len - 1)``):

- TTFT = first token - the request's send (``RequestTimeline.sent_s``: when the engine was handed
  the request; for ``generate`` batches, the batch's start, and ``ttft_origin`` says which);
- end-to-end (e2e) = finish (the last token) - the send; a request that finished without a
  first-token time (an answer that came whole) has an e2e and none of the per-token figures;
- TPOT = (e2e - TTFT) / (output tokens - 1); none for a request of one token;
- ITL: one entry per streamed chunk after the first, the time since the previous chunk, whatever
  the tokens the chunk carries (chunks of 1, 3 and 1 tokens arriving 30 ms and 10 ms apart give
  [30, 10] ms), so that the ITLs of a request add up to e2e - TTFT.

llem's own definitions, under their own names:

- ITL per token (``itl_per_token_ms``): a chunk's gap divided by the tokens it carries, counted
  once per token (the chunks above give [10, 10, 10, 10] ms);
- TTFT and e2e from the schedule (``ttft_from_schedule_ms``, ``e2e_from_schedule_ms``): from the
  request's scheduled send (open-loop and offline traffic), so the pacing driver's lateness
  (``traffic.pacing_lateness_ms``, actual - scheduled send) is inside them; none for requests
  without a planned send time (closed loop, ``generate`` batches).

Concurrency is the number of requests in flight (sent, not yet finished) at an instant, queued
ones included, and the running batch is the number between their first and last token (what
the engine's batch held, as near as request timelines tell: a request in prefill is not counted
yet); a mean over a span is time-weighted (the integral of that count over the span / the span).

Goodput: a request meets the SLOs when its TTFT, TPOT and e2e are each within ``slo.ttft_ms``,
``slo.tpot_ms``, ``slo.e2e_ms`` (a null SLO is not judged; a one-token request has no TPOT and is
not judged on it; one without a first-token time misses an SLO on TTFT or TPOT and is judged on
e2e alone otherwise). The J per output token of goodput is the window's whole energy divided by the
output tokens of the requests that met every SLO: what each useful token cost, the energy spent on
requests that missed included.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from llem.figures.latency import percentiles
from llem.result.requests import RequestRecord
from llem.vocabulary.workload import RequestTimeline

# --------------------------------------------------------------------------- per request


@dataclass(frozen=True)
class RequestFigures:
    """One request's latency (seconds; None where it is not defined)."""

    request_id: int
    output_tokens: int
    ttft_s: float | None  # from the send; None: the request produced no token
    e2e_s: float | None  # from the send
    tpot_s: float | None  # None: fewer than 2 tokens
    itl_s: tuple[float, ...]  # one per chunk after the first (vLLM bench serve)
    itl_per_token_s: tuple[float, ...] = ()  # each chunk's gap spread over its tokens (llem)
    ttft_from_schedule_s: float | None = None  # None: no scheduled send time
    e2e_from_schedule_s: float | None = None


def request_figures(t: RequestTimeline) -> RequestFigures:
    """TTFT, e2e, TPOT and ITLs of one request (see the module docstring)."""
    first, finish, n = t.first_token_s, t.finish_s, t.output_tokens
    if finish is None:
        return RequestFigures(t.request_id, n, None, None, None, ())
    e2e, scheduled = finish - t.sent_s, t.scheduled_s
    if first is None:  # it finished without a first-token time (a whole answer)
        return RequestFigures(
            t.request_id,
            n,
            None,
            e2e,
            None,
            (),
            e2e_from_schedule_s=None if scheduled is None else finish - scheduled,
        )
    ttft = first - t.sent_s
    tpot = (e2e - ttft) / (n - 1) if n > 1 else None
    gaps = [t.chunk_times_s[k] - t.chunk_times_s[k - 1] for k in range(1, len(t.chunk_times_s))]
    per_token: list[float] = []
    for gap, tokens in zip(gaps, t.chunk_tokens[1:], strict=True):
        if tokens > 0:
            per_token.extend([gap / tokens] * tokens)
    return RequestFigures(
        request_id=t.request_id,
        output_tokens=n,
        ttft_s=ttft,
        e2e_s=e2e,
        tpot_s=tpot,
        itl_s=tuple(gaps),
        itl_per_token_s=tuple(per_token),
        ttft_from_schedule_s=None if scheduled is None else first - scheduled,
        e2e_from_schedule_s=None if scheduled is None else finish - scheduled,
    )


@dataclass(frozen=True)
class LatencyFigures:
    """Percentiles (p50/p90/p99) over the requests, in ms; None where there are no values."""

    ttft_ms: dict[str, float] | None
    tpot_ms: dict[str, float] | None
    itl_ms: dict[str, float] | None
    e2e_ms: dict[str, float] | None
    itl_per_token_ms: dict[str, float] | None = None
    ttft_from_schedule_ms: dict[str, float] | None = None
    e2e_from_schedule_ms: dict[str, float] | None = None


def _ms(values: Iterable[float | None]) -> dict[str, float] | None:
    return percentiles((v for v in values if v is not None), 1000.0)


def latency_figures(figures: Sequence[RequestFigures]) -> LatencyFigures:
    return LatencyFigures(
        ttft_ms=_ms(f.ttft_s for f in figures),
        tpot_ms=_ms(f.tpot_s for f in figures),
        itl_ms=_ms(x for f in figures for x in f.itl_s),
        e2e_ms=_ms(f.e2e_s for f in figures),
        itl_per_token_ms=_ms(x for f in figures for x in f.itl_per_token_s),
        ttft_from_schedule_ms=_ms(f.ttft_from_schedule_s for f in figures),
        e2e_from_schedule_ms=_ms(f.e2e_from_schedule_s for f in figures),
    )


def pacing_lateness_ms(timelines: Sequence[RequestTimeline]) -> dict[str, float] | None:
    """Actual send - scheduled send, ms: ``{"p50", "p99", "max"}``; None when no request had a
    scheduled time (closed loop)."""
    late = [(t.sent_s - t.scheduled_s) * 1000.0 for t in timelines if t.scheduled_s is not None]
    pct = percentiles(late)
    if pct is None:
        return None
    return {"p50": pct["p50"], "p99": pct["p99"], "max": max(late)}


# --------------------------------------------------------------------------- concurrency


@dataclass(frozen=True)
class ConcurrencyFigures:
    mean: float  # time-weighted requests in flight (sent .. finish) over the span
    max: int  # most requests in flight at once within the span
    running_mean: float  # time-weighted requests running (first token .. finish) over the span
    running_max: int


def _spans(timelines: Sequence[RequestTimeline]) -> list[tuple[float, float]]:
    return [(t.sent_s, t.finish_s) for t in timelines if t.finish_s is not None]


def _running_spans(timelines: Sequence[RequestTimeline]) -> list[tuple[float, float]]:
    """From the first token to the last: the request is in the engine's running batch (a request
    still waiting for its first token may be queued behind a full batch, or in prefill)."""
    return [
        (t.first_token_s, t.finish_s)
        for t in timelines
        if t.first_token_s is not None and t.finish_s is not None
    ]


def _count(spans: Sequence[tuple[float, float]], t0: float, t1: float) -> tuple[float, int]:
    """Time-weighted mean and maximum of how many spans cover an instant of ``[t0, t1]``."""
    inside = sum(max(0.0, min(b, t1) - max(a, t0)) for a, b in spans)
    # the count at an instant: +1 at a start, -1 at an end (ends first at equal times)
    events = sorted(
        [(max(a, t0), 1) for a, b in spans if b > t0 and a < t1]
        + [(min(b, t1), -1) for a, b in spans if b > t0 and a < t1]
    )
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    return inside / (t1 - t0), peak


def concurrency(
    timelines: Sequence[RequestTimeline], t0: float, t1: float
) -> ConcurrencyFigures | None:
    """Requests in flight (sent .. finish) and running (first token .. finish) over ``[t0, t1]``:
    time-weighted means and maxima. None for an empty span.

    In flight counts queued requests too: offline traffic sends every request at 0, so its
    in-flight count starts at N whatever the batch. The running count is what the engine's batch
    held, as near as request timelines tell it (a request in prefill is not counted yet), and is
    what the steady state's concurrency check reads."""
    if t1 <= t0:
        return None
    mean, peak = _count(_spans(timelines), t0, t1)
    running_mean, running_peak = _count(_running_spans(timelines), t0, t1)
    return ConcurrencyFigures(mean, peak, running_mean, running_peak)


def tokens_between(timelines: Sequence[RequestTimeline], t0: float, t1: float) -> int:
    """Output tokens whose chunks reached the host within ``[t0, t1]``."""
    return sum(
        n
        for t in timelines
        for time_s, n in zip(t.chunk_times_s, t.chunk_tokens, strict=True)
        if t0 <= time_s <= t1
    )


def finished_between(timelines: Sequence[RequestTimeline], t0: float, t1: float) -> int:
    """Requests whose last token reached the host within ``[t0, t1]``."""
    return sum(1 for t in timelines if t.finish_s is not None and t0 <= t.finish_s <= t1)


# --------------------------------------------------------------------------- goodput


@dataclass(frozen=True)
class Slo:
    """Service-level objectives in ms (None: not judged)."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None

    @property
    def any(self) -> bool:
        return any(v is not None for v in (self.ttft_ms, self.tpot_ms, self.e2e_ms))


def slo_met(f: RequestFigures, slo: Slo) -> bool | None:
    """Whether one request met every SLO set; None when no SLO is set. A request that did not
    finish misses every SLO, one without a first-token time every SLO on TTFT or TPOT; one of a
    single token is not judged on TPOT."""
    if not slo.any:
        return None
    if f.e2e_s is None:
        return False
    if f.ttft_s is None and (slo.ttft_ms is not None or slo.tpot_ms is not None):
        return False
    checks = (
        (slo.ttft_ms, f.ttft_s),
        (slo.tpot_ms, f.tpot_s),
        (slo.e2e_ms, f.e2e_s),
    )
    return all(limit is None or value is None or value * 1000.0 <= limit for limit, value in checks)


@dataclass(frozen=True)
class GoodputFigures:
    requests_met: int
    fraction: float
    requests_per_s: float
    output_tokens_per_s: float
    good_output_tokens: int


def goodput(figures: Sequence[RequestFigures], slo: Slo, window_s: float) -> GoodputFigures | None:
    """The requests that met every SLO, and their rate over ``window_s``; None without an SLO,
    requests or window."""
    if not slo.any or not figures or window_s <= 0:
        return None
    good = [f for f in figures if slo_met(f, slo)]
    tokens = sum(f.output_tokens for f in good)
    return GoodputFigures(
        requests_met=len(good),
        fraction=len(good) / len(figures),
        requests_per_s=len(good) / window_s,
        output_tokens_per_s=tokens / window_s,
        good_output_tokens=tokens,
    )


# --------------------------------------------------------------------------- records


def request_records(
    timelines: Sequence[RequestTimeline], window_start_s: float, slo: Slo
) -> list[RequestRecord]:
    """requests.jsonl's rows: times in seconds from ``window_start_s``, latency in ms."""

    def rel(t: float | None) -> float | None:
        return None if t is None else round(t - window_start_s, 6)

    def ms(s: float | None) -> float | None:
        return None if s is None else round(s * 1000.0, 4)

    out = []
    for t in timelines:
        f = request_figures(t)
        out.append(
            RequestRecord(
                request_id=t.request_id,
                prompt_index=t.prompt_index,
                scheduled_s=rel(t.scheduled_s),
                sent_s=rel(t.sent_s),
                first_token_s=rel(t.first_token_s),
                finish_s=rel(t.finish_s),
                input_tokens=t.input_tokens,
                output_tokens=t.output_tokens,
                ttft_ms=ms(f.ttft_s),
                tpot_ms=ms(f.tpot_s),
                e2e_ms=ms(f.e2e_s),
                slo_met=slo_met(f, slo),
                ttft_from_schedule_ms=ms(f.ttft_from_schedule_s),
                finish_reason=t.finish_reason,
            )
        )
    return out
