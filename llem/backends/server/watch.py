"""The measured window's serving with the server's own view of it: the workload through
``client.serve_async`` while ``metrics.MetricsScraper`` polls the server's ``/metrics`` on the
same event loop (no thread). The scraper starts one poll before the first request and stops one
poll after the last answer; on an exception or a cancellation (Ctrl-C under ``asyncio.run``
cancels the main task) it stops at once, its polling task awaited and its session closed, and
the error goes on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llem.backends.server import loop
from llem.backends.server.client import ClientConfig, serve_async
from llem.backends.server.metrics import MetricsScraper, ServerMetrics
from llem.vocabulary.workload import ScheduledRequest, ServeOutput

#: how often the server's /metrics is read during the window (milliseconds)
POLL_MS = 100.0
#: how long one poll may take (the window's first and last polls are waited for)
POLL_TIMEOUT_S = 1.0


@dataclass(frozen=True)
class Watched:
    """The workload's output and the server's metrics over the same window."""

    out: ServeOutput
    metrics: ServerMetrics
    metrics_url: str


async def serve_watched_async(
    requests: Sequence[ScheduledRequest],
    max_concurrency: int | None,
    config: ClientConfig,
    save_outputs: bool = False,
    poll_ms: float = POLL_MS,
) -> Watched:
    """Serve the workload while scraping the server's /metrics (see the module)."""
    scraper = MetricsScraper(config.base_url, poll_ms, timeout_s=POLL_TIMEOUT_S)
    async with scraper:
        out = await serve_async(requests, max_concurrency, config, save_outputs)
    assert scraper.result is not None
    return Watched(out, scraper.result, scraper.url)


def serve_watched(
    requests: Sequence[ScheduledRequest],
    max_concurrency: int | None,
    config: ClientConfig,
    save_outputs: bool = False,
    poll_ms: float = POLL_MS,
) -> Watched:
    """``serve_watched_async`` on an event loop of its own, which SIGTERM stops cleanly
    (``loop.run``; call it where none is running)."""
    return loop.run(serve_watched_async(requests, max_concurrency, config, save_outputs, poll_ms))
