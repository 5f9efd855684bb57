"""The steady state of a run's window, from its request timelines (the serving figures it builds on,
and what concurrency means, are ``llem.figures.serving``'s).

The steady state is the part of the window where the engine runs as it was configured to:

- offline and closed-loop traffic, ML.ENERGY benchmark v3's rule (ml-energy/benchmark,
  ``mlenergy/benchmark/llm/benchmark.py``, class ``RequestTracker``: ``notify_request_started``
  sets the start once ``max_num_seqs`` requests have their first token, ``notify_request_finished``
  the end once ``num_requests - max_num_seqs - 1`` requests have finished; the ``- 1`` ends it
  slightly early so that no ramp-down is included): from the instant the B-th request (in
  first-token order) has its first token to the instant the (N - B - 1)-th request (in finish
  order) finishes, B being the configured maximum batch (for closed loop, the smaller of it and
  ``traffic.max_concurrency``) and N the requests of the window. It needs N >= 2B + 1.
- open-loop traffic: from the instant ``traffic.warmup_requests`` requests have finished (the
  workload's origin when 0) to the arrival of the first of the last ``traffic.cooldown_requests``
  requests (the last finish when 0); the run takes 10 % of the requests, rounded up, for an edge
  left null. This is llem's own rule: vLLM's ``bench serve`` sends ``--num-warmups`` extra
  requests before its clock starts and leaves no cool-down out.

A steady state shorter than ``measurement.min_steady_state_s``, or (ML.ENERGY's rule only) whose
mean running batch is under ``measurement.min_steady_concurrency`` x B, is no steady state, with the
reason. (ML.ENERGY's ``scripts/validate_results.py`` flags runs whose steady state is shorter than
30 s, ``check_steady_state_duration``, or whose mean running batch is under 80 % of
``max_num_seqs``, ``check_batch_size_saturation``; llem's defaults are configuration.) Open-loop
traffic is not judged by concurrency: its offered load, not the engine's batch, sets it.

Static batches (an engine that runs each batch to its end before the next starts, PyTorch's
``generate``) have no steady state to judge: every batch fills and drains, so the running batch
never holds at B. They get none, with that reason, and no condition is recorded
(``SteadyEdges.judged`` is false); their figures are the whole window's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llem.figures.serving import concurrency
from llem.vocabulary.workload import RequestTimeline

OPEN_LOOP_RULE = "open_loop"
BATCH_RULE = "mlenergy_v3"


@dataclass(frozen=True)
class SteadyRule:
    """How the steady state is chosen (see the module docstring)."""

    open_loop: bool
    max_batch: int  # B: the configured maximum batch (0: unknown, none is judged)
    warmup_requests: int = 0
    cooldown_requests: int = 0
    min_s: float = 0.0  # measurement.min_steady_state_s
    min_concurrency: float = 0.0  # measurement.min_steady_concurrency (fraction of B)
    static_batches: bool = False  # each batch runs to its end before the next: none is judged


@dataclass(frozen=True)
class SteadyEdges:
    """The steady state's edges (perf_counter seconds) and mean concurrency, or None with the
    reason it does not exist."""

    start_s: float | None
    end_s: float | None
    mean_concurrency: float | None  # requests in flight (queued included)
    rule: str  # "mlenergy_v3" | "open_loop"
    null_reason: str | None = None
    mean_running: float | None = None  # requests running (first token .. finish)
    judged: bool = True  # False: none is meant (static batches), so its absence is no condition


UNKNOWN_BATCH_REASON = (
    "the engine's maximum batch is unknown (its concurrency knob is not set), so whether the "
    "batch ran full cannot be judged: set the knob to the engine's limit"
)
STATIC_REASON = (
    "static batches: each batch fills and drains before the next starts, so no steady state is "
    "judged (the figures are the whole window's)"
)


def below(value: float, floor: float) -> tuple[str, str]:
    """``value`` and ``floor`` written with the fewest decimals (2 to 6) that tell them apart,
    so that a value just under its floor never reads as equal to it (0.849 < 0.85, not
    0.85 < 0.85)."""
    for digits in range(2, 7):
        a, b = f"{value:.{digits}f}", f"{floor:.{digits}f}"
        if a != b:
            return a, b
    return f"{value:.6g}", f"{floor:.6g}"


def _batch_edges(timelines: Sequence[RequestTimeline], b: int) -> tuple[float, float] | str:
    n = len(timelines)
    if b < 1:
        return f"the configured maximum batch is {b}"
    if n < 2 * b + 1:
        return (
            f"too few requests: {n} < 2 x {b} + 1 (ML.ENERGY's rule needs the maximum batch "
            f"B={b} running before N - B - 1 requests finish)"
        )
    firsts = sorted(t.first_token_s for t in timelines if t.first_token_s is not None)
    finishes = sorted(t.finish_s for t in timelines if t.finish_s is not None)
    if len(firsts) < b or len(finishes) < n - b - 1:
        return "too few requests produced tokens"
    return firsts[b - 1], finishes[n - b - 2]


def _open_edges(
    timelines: Sequence[RequestTimeline], origin_s: float, warmup: int, cooldown: int
) -> tuple[float, float] | str:
    n = len(timelines)
    if n <= warmup + cooldown:
        return (
            f"too few requests: {n} <= traffic.warmup_requests={warmup} + "
            f"traffic.cooldown_requests={cooldown}"
        )
    finishes = sorted(t.finish_s for t in timelines if t.finish_s is not None)
    if len(finishes) < max(warmup, 1):
        return "too few requests produced tokens"
    start = finishes[warmup - 1] if warmup > 0 else origin_s
    if cooldown > 0:
        arrivals = sorted(t.arrival_s for t in timelines)
        return start, arrivals[n - cooldown]
    return start, finishes[-1]


def steady_state(
    timelines: Sequence[RequestTimeline], rule: SteadyRule, origin_s: float
) -> SteadyEdges:
    """The steady state of ``timelines`` under ``rule`` (``origin_s``: the workload's origin, the
    open-loop steady state's start when ``warmup_requests`` is 0)."""
    name = OPEN_LOOP_RULE if rule.open_loop else BATCH_RULE
    if rule.static_batches and not rule.open_loop:
        return SteadyEdges(None, None, None, name, STATIC_REASON, judged=False)
    if rule.max_batch < 1 and not rule.open_loop:
        return SteadyEdges(None, None, None, name, UNKNOWN_BATCH_REASON)
    edges = (
        _open_edges(timelines, origin_s, rule.warmup_requests, rule.cooldown_requests)
        if rule.open_loop
        else _batch_edges(timelines, rule.max_batch)
    )
    if isinstance(edges, str):
        return SteadyEdges(None, None, None, name, edges)
    start, end = edges
    if end <= start:
        return SteadyEdges(None, None, None, name, "the steady state would end before it starts")
    if end - start < rule.min_s:
        more = "traffic.n_requests"
        if rule.open_loop:
            more = "traffic.duration_s or traffic.n_requests"
        return SteadyEdges(
            None,
            None,
            None,
            name,
            f"the steady state lasts {end - start:.3f} s < measurement.min_steady_state_s="
            f"{rule.min_s:g} (send more requests: {more})",
        )
    conc = concurrency(timelines, start, end)
    mean = conc.mean if conc is not None else 0.0
    running = conc.running_mean if conc is not None else 0.0
    floor = rule.min_concurrency * rule.max_batch
    if not rule.open_loop and running < floor:
        shown, floor_shown = below(running, floor)
        return SteadyEdges(
            None,
            None,
            None,
            name,
            f"mean running batch {shown} < measurement.min_steady_concurrency="
            f"{rule.min_concurrency:g} x the maximum batch {rule.max_batch} = {floor_shown}",
        )
    return SteadyEdges(start, end, mean, name, mean_running=running)
