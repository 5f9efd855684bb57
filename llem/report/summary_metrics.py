"""The result.json figures that summary.csv summarises over a configuration's repeats, in its
column order: those every run has, then those summarised where some run has them (the serving
figures of result schema 3 and later, the quality figures of scored runs, what speculative decoding
did), and the traffic a configuration served, which is part of a row's identity. The footprint
figures are ``llem.report.footprint_metrics``; how each is summarised is ``llem.report.stats``.
"""

from __future__ import annotations

#: result.json fields summarised over repeats (ok runs only), in summary.csv column order.
METRICS = (
    "throughput.output_tokens_per_s",
    "throughput.requests_per_s",
    "throughput.generate_output_tokens_per_s",
    "latency.generate_s",
    "latency.ttft_ms.p50",
    "latency.ttft_ms.p90",
    "latency.ttft_ms.p99",
    "latency.itl_ms.p50",
    "latency.itl_ms.p90",
    "latency.itl_ms.p99",
    "latency.request_latency_s.p50",
    "latency.request_latency_s.p90",
    "latency.request_latency_s.p99",
    "energy.total_j",
    "energy.idle_adjusted_j",
    "energy.j_per_output_token",
    "energy.j_per_total_token",
    "energy.output_tokens_per_j",
    "energy.j_per_request",
    "energy.wh_per_1k_requests",
    "energy.avg_power_w",
    "energy.peak_power_w",
    "energy.cpu_package_j",
    "memory.peak_allocated_mb",
    "memory.peak_reserved_mb",
    "memory.peak_device_used_mb",
    "memory.peak_host_rss_mb",
)
#: schema 3's serving figures: summarised where some run has them (older results have none)
SERVING_METRICS = (
    "latency.tpot_ms.p50",
    "latency.tpot_ms.p90",
    "latency.tpot_ms.p99",
    "latency.e2e_ms.p50",
    "latency.e2e_ms.p90",
    "latency.e2e_ms.p99",
    # llem's own latency definitions (result schema 5; llem.figures.serving)
    "latency.itl_per_token_ms.p50",
    "latency.itl_per_token_ms.p90",
    "latency.itl_per_token_ms.p99",
    "latency.ttft_from_schedule_ms.p50",
    "latency.ttft_from_schedule_ms.p90",
    "latency.ttft_from_schedule_ms.p99",
    "latency.e2e_from_schedule_ms.p50",
    "latency.e2e_from_schedule_ms.p90",
    "latency.e2e_from_schedule_ms.p99",
    "concurrency.mean",
    "concurrency.running_mean",
    "concurrency.max",
    "concurrency.steady_state_mean",
    "steady_state.window_s",
    "steady_state.output_tokens_per_s",
    "steady_state.mean_concurrency",
    "steady_state.mean_running",
    "steady_state.energy_j",
    "steady_state.j_per_output_token",
    "steady_state.avg_power_w",
    "goodput.fraction",
    "goodput.requests_per_s",
    "goodput.output_tokens_per_s",
    "goodput.j_per_output_token",
    # where the energy goes (llem.figures.attribution)
    "energy.prefill_j",
    "energy.decode_j",
    "energy.between_steps_j",
    "energy.j_per_prefill_token",
    "energy.j_per_decode_token",
)
#: schema 6's quality figures (issue 32): summarised where some run scored its answers
QUALITY_METRICS = (
    "quality.value",
    "quality.ci95_low",
    "quality.ci95_high",
    "quality.n_answers",
    "quality.n_correct",
    "quality.n_unreadable",
    "quality.j_per_correct_answer",
    "quality.correct_answers_per_kj",
    "quality.scoring_s",
)
#: what speculative decoding did (docs/speculative.md): summarised where some run speculated
SPECULATIVE_METRICS = (
    "speculative.acceptance_rate",
    "speculative.tokens_per_target_step",
    "speculative.j_per_accepted_draft_token",
)
#: the traffic a configuration served, as summary.csv columns (where runs recorded it)
TRAFFIC_FIELDS = (
    "traffic.kind",
    "traffic.rate_per_s",
    "traffic.burstiness",
    "traffic.max_concurrency",
)
