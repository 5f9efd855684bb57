"""The server's own view of the measured window as result figures (``result.server``'s
``metrics_*``, requests running and waiting, token counter deltas) and as
``server_metrics.csv``'s rows, from the scraper's samples (``metrics.ServerMetrics``).

Gauges (running, waiting) are averaged over time over the polls inside the traffic (the first
and last polls bracket it, idle): each poll's value holds until the next poll.
Counters (prompt, generation tokens, finished requests) give how far they grew from the first
poll to the last. A figure the server does not expose is null with the reason; where no poll gave
a sample (no ``/metrics``, unknown names, every poll failed) all of them are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from llem.backends.server.metric_names import FAMILIES
from llem.backends.server.metrics import MetricsSample, ServerMetrics
from llem.result.server import SERVER_METRICS_FILE, ServerMetricsRow

#: the section's figures that come from the server's /metrics (null together when it has none)
FIGURES = (
    "metrics_source",
    "metrics_polls",
    "metrics_failed_polls",
    "metrics_span_s",
    "running_requests_mean",
    "running_requests_max",
    "waiting_requests_mean",
    "waiting_requests_max",
    "prompt_tokens",
    "generation_tokens",
    "requests_finished",
    "metrics_file",
)


@dataclass(frozen=True)
class UsageCounts:
    """The window's token counts from the usage of llem's own requests (None: not all had one)."""

    prompt_tokens: int | None
    completion_tokens: int | None


@dataclass
class View:
    """The section's fields of the server's view, the null reasons, and the file's rows."""

    fields: dict[str, Any] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)  # figure name -> why it is null
    rows: list[ServerMetricsRow] = field(default_factory=list)


def server_view(metrics: ServerMetrics, url: str, origin_s: float, usage: UsageCounts) -> View:
    """The figures of ``metrics`` read from ``url``; times of rows from ``origin_s``."""
    view = View()
    view.fields.update(
        metrics_url=url,
        metrics_poll_ms=metrics.poll_ms,
        usage_prompt_tokens=usage.prompt_tokens,
        usage_completion_tokens=usage.completion_tokens,
    )
    for name, value in (("prompt", usage.prompt_tokens), ("completion", usage.completion_tokens)):
        if value is None:
            view.reasons[f"usage_{name}_tokens"] = "not every request's stream carried usage"
    samples = metrics.samples
    if metrics.family is None or not samples:
        why = metrics.reason or "no poll of the server's /metrics answered"
        view.fields.update(dict.fromkeys(FIGURES))
        view.reasons.update(dict.fromkeys(FIGURES, why))
        return view
    names = FAMILIES[metrics.family]
    view.fields.update(
        metrics_source=metrics.family,
        metrics_polls=metrics.polls,
        metrics_failed_polls=metrics.failed_polls,
        metrics_span_s=round(samples[-1].t_s - samples[0].t_s, 6),
        metrics_file=SERVER_METRICS_FILE,
    )
    for gauge, metric in (("running", names.running), ("waiting", names.waiting)):
        _gauge(view, samples, gauge, f"{url} has no {metric}")
    counters: tuple[tuple[str, str, str | None], ...] = (
        ("prompt_tokens", "prompt_tokens_total", names.prompt_tokens),
        ("generation_tokens", "generation_tokens_total", names.generation_tokens),
        ("requests_finished", "requests_total", names.requests),
    )
    for key, attribute, counted in counters:
        absent = (
            f"{url} has no {counted}"
            if counted
            else f"{metrics.family}'s server counts no finished requests"
        )
        _counter(view, samples, key, attribute, absent)
    view.rows = _rows(metrics, origin_s)
    return view


def _gauge(view: View, samples: Sequence[MetricsSample], gauge: str, absent: str) -> None:
    """``{gauge}_requests_mean`` and ``_max`` over the polls inside the traffic: the first poll
    comes before the first request and the last after the last answer, so neither sees it (with
    no poll between them, both figures are null with the reason, never the idle edges' 0). Each
    inside poll's value holds until the next poll (the last one's until the final poll)."""
    mean_key, max_key = f"{gauge}_requests_mean", f"{gauge}_requests_max"
    inside = samples[1:-1]
    points = [(s.t_s, getattr(s, gauge)) for s in inside if getattr(s, gauge) is not None]
    if not points:
        span_ms = (samples[-1].t_s - samples[0].t_s) * 1000
        why = (
            absent
            if inside
            else (
                f"no poll fell between the first request and the last answer ({span_ms:.0f} ms "
                f"apart, polled every {view.fields['metrics_poll_ms']:g} ms): the server was never "
                "seen under the load"
            )
        )
        view.fields.update({mean_key: None, max_key: None})
        view.reasons.update({mean_key: why, max_key: why})
        return
    view.fields[max_key] = max(v for _, v in points)
    ends = [t for t, _ in points[1:]] + [samples[-1].t_s]
    span = ends[-1] - points[0][0]
    if span <= 0:
        view.fields[mean_key] = None
        view.reasons[mean_key] = "the polls inside the traffic span no time to average over"
        return
    held = sum(v * (end - t) for (t, v), end in zip(points, ends, strict=True))
    view.fields[mean_key] = round(held / span, 4)


def _counter(
    view: View, samples: Sequence[MetricsSample], key: str, attribute: str, absent: str
) -> None:
    """``key``: how far the server's counter (the samples' ``attribute``) grew from the first
    poll to the last."""
    values = [v for s in samples if (v := getattr(s, attribute)) is not None]
    view.fields[key] = None
    if not values:
        view.reasons[key] = absent
    elif len(values) < 2:
        view.reasons[key] = "fewer than two polls read the counter: no growth to take"
    elif values[-1] < values[0]:
        view.reasons[key] = (
            f"the server's counter went down ({values[0]:g} -> {values[-1]:g}) during the "
            "window: the server restarted"
        )
    else:
        view.fields[key] = values[-1] - values[0]


def _rows(metrics: ServerMetrics, origin_s: float) -> list[ServerMetricsRow]:
    """One row per sample: the gauges, and the counters' growth since the previous sample."""
    samples = metrics.samples
    rows = [
        ServerMetricsRow(
            round(samples[0].t_s - origin_s, 6), samples[0].running, samples[0].waiting
        )
    ]
    for sample, interval in zip(samples[1:], metrics.intervals(), strict=True):
        rows.append(
            ServerMetricsRow(
                round(sample.t_s - origin_s, 6),
                sample.running,
                sample.waiting,
                interval.prompt_tokens,
                interval.generation_tokens,
            )
        )
    return rows
