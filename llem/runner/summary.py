"""What a single run prints when it ends: its figures, one line on energy, and the result path.

llem: m on cpu (float32): 16 requests, 908 output tokens in 33.22 s = 27.3 tokens/s
energy: unavailable: no NVIDIA GPU/NVML (NVMLError_LibraryNotFound); CPU package energy: no RAPL ...
quality: arithmetic accuracy 0.422 (95% 0.309-0.544, Wilson), 27/64 correct; J per correct ...
result: outputs/2026-11-21/10-00-00/result.json

A server llem did not start (``server.url``) is named by its served model beside the tokenizer's,
on the server's GPUs where ``server.gpus`` names them, else on a device not stated (llem's own
device is not the server's):

llem: fake-model (served; tokenizer m) on the server's GPUs 0, 1 (server.gpus), dtype ...: ...

A ``measurement.boundary=node`` run prints one more line after the energy line: what its total
covers, each component's joules (or why it has none; the GPUs' with their bound), and the J per
output token of the sum; a total without a bound says so (RAPL states no accuracy).

In a sweep, an energy line that a point of the same sweep printed already is not printed again
(with no GPU and no RAPL every point would repeat it); a measured figure differs per point, so a
GPU run's line is printed every time.
"""

from __future__ import annotations

import re
from pathlib import Path

from llem.figures.digits import plain
from llem.result import Energy, RunResult
from llem.runner.footprint_line import footprint_lines

CPU_PART = "; CPU package energy: "
FIGURE = re.compile(r"\d J \(")  # a measured figure ("12.3 J (nvml_counter)"), not a reason


def energy_line(e: Energy) -> str:
    """One line on the run's energy: the GPU figure or why there is none, then the CPU package
    figure (RAPL) or why there is none; the reasons are said once here, not per field."""
    if e.source == "unavailable":
        gpu = f"unavailable: {e.unavailable_reason}"
    elif e.total_j is None:
        gpu = f"not measured ({e.source}): " + "; ".join(e.warnings)
    else:
        jpt = e.j_per_output_token
        gpu = f"{e.total_j:.1f} J ({e.source})" + (
            f", {plain(jpt)} J/token" if jpt is not None else ""
        )
    cpu: str | None
    if e.cpu_package_j is not None:
        cpu = f"{e.cpu_package_j:.1f} J (RAPL)"
    elif e.cpu_unavailable_reason != e.unavailable_reason:  # energy=none: said once already
        cpu = e.cpu_unavailable_reason
    else:
        cpu = None
    return f"energy: {gpu}" + (f"{CPU_PART}{cpu}" if cpu else "")


_PARTS = (("GPUs", "gpu_j"), ("CPU packages", "cpu_package_j"), ("DRAM", "dram_j"))


def boundary_line(result: RunResult) -> str | None:
    """``boundary: node = GPUs 500.0 J + CPU packages 160.0 J + DRAM 20.0 J = 680.0 J,
    0.68 J/token``; a component that has no figure is named with why (a DRAM the CPU does not
    have says it is outside). None for ``measurement.boundary=gpu``, which the energy line says."""
    b = result.boundary
    if b is None or b.boundary != "node":
        return None
    parts = []
    for label, key in _PARTS:
        value, bnd = getattr(b, key), getattr(b, key + "_uncertainty")
        why = result.null_reasons.get(f"boundary.{key}", "not measured")
        pm = f" +/- {bnd:.1f}" if bnd is not None else ""
        parts.append(f"{label} {value:.1f}{pm} J" if value is not None else f"{label}: {why}")
    if b.total_j is None:
        total = "no total"
    else:
        jpt = b.j_per_output_token
        total = f"{b.total_j:.1f} J" + (f", {plain(jpt)} J/token" if jpt is not None else "")
        if "boundary.total_j_uncertainty" in result.null_reasons:
            total += " (no bound: RAPL states no accuracy; see null_reasons)"
    return "boundary: node = " + " + ".join(parts) + f" = {total}"


def serving_line(result: RunResult) -> str | None:
    """One line on a served workload (traffic other than offline, or SLOs set): its traffic,
    TTFT and TPOT p90, goodput, and the steady state or why there is none."""
    traffic, goodput = result.traffic, result.goodput
    if traffic is None or (traffic.kind == "offline" and goodput is None):
        return None
    kind = traffic.kind or "offline"
    if traffic.rate_per_s is not None:
        kind += f" at {traffic.rate_per_s:g}/s"
    elif traffic.max_concurrency is not None:
        kind += f" {traffic.max_concurrency} in flight"
    parts = [f"serving: {kind}"]
    lat = result.latency
    for name, pct in (("TTFT", lat.ttft_ms), ("TPOT", lat.tpot_ms)):
        if pct is not None and pct.p90 is not None:
            parts.append(f"{name} p90 {_ms(pct.p90)} ms")
    if goodput is not None:
        parts.append(f"{goodput.requests_met}/{result.workload.requests} met the SLOs")
    steady = result.steady_state
    if steady is not None:
        parts.append(f"steady state {steady.window_s:.3g} s")
    else:
        parts.append(f"no steady state ({result.null_reasons.get('steady_state', 'unknown')})")
    return ", ".join(parts)


def quality_line(result: RunResult) -> str | None:
    """One line on a scored run: the task's metric with its interval, the count, and J per
    correct answer (with its bound) or why there is none."""
    q = result.quality
    if q is None:
        return None
    if q.value is None:
        return f"quality: {q.task}: nothing scored ({result.null_reasons.get('quality.value')})"
    interval = ""
    if q.ci95_low is not None and q.ci95_high is not None:
        method = q.interval_method.split(" ", 1)[0] or "interval"
        interval = f" (95% {q.ci95_low:.3f}-{q.ci95_high:.3f}, {method})"
    line = (
        f"quality: {q.task} {q.metric} {q.value:.3f}{interval}, "
        f"{q.n_correct}/{q.n_answers} answers correct{_over(q.n_items, q.n_answers)}; "
        "J per correct answer: "
    )
    if q.j_per_correct_answer is None:
        return line + str(result.null_reasons.get("quality.j_per_correct_answer", "not measured"))
    bound = q.j_per_correct_answer_uncertainty
    return line + plain(q.j_per_correct_answer) + (f" ± {plain(bound)}" if bound else "") + " J"


def _ms(value: float) -> str:
    """3 significant digits, never in exponent form (1790, 41.2, 0.512)."""
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


def _once_per_sweep(line: str, said: set[str] | None) -> str | None:
    """``line``, less what a point of the same sweep printed already (``said``: the sweep's own
    record, kept by the command that runs it; None for a single run): a reason every point shares
    (no GPU, no RAPL) is said once, not after every point; a single run always says it all. A
    measured figure differs per point, so its part stays."""
    if said is None:
        return line
    gpu, sep, cpu = line.partition(CPU_PART)
    parts = [gpu] + ([sep + cpu] if sep else [])
    kept = [p for p in parts if p not in said or FIGURE.search(p)]
    said.update(parts)
    if not kept:
        return None
    return "".join(kept) if kept[0] == gpu else "energy: " + kept[0].removeprefix("; ")


def what_ran(result: RunResult) -> str:
    """``m on cpu (float32)``; for a server llem did not start, the served model and the
    tokenizer's, and the server's device as far as it is known (never llem's own):
    ``fake-model (served; tokenizer m) on the server's GPUs 0, 1 (server.gpus), dtype ...``."""
    server = result.server
    if server is None or server.launched:
        return f"{result.model} on {result.device} ({result.dtype})"
    gpus = (result.config or {}).get("server", {}).get("gpus") if result.device else None
    where = (
        f"the server's GPU{'s' if len(gpus) > 1 else ''} {', '.join(map(str, gpus))} (server.gpus)"
        if gpus
        else "the server's device, not stated (server.gpus names its GPUs)"
    )
    return f"{server.model} (served; tokenizer {result.model}) on {where}, dtype {result.dtype}"


def summary_line(result: RunResult, run_dir: Path, said: set[str] | None = None) -> str:
    """The lines printed after a run; ``said``: what the sweep's earlier points printed (None: a
    single run, which says everything)."""
    w, t = result.workload, result.throughput
    rate = t.output_tokens_per_s
    serving = serving_line(result)
    energy = _once_per_sweep(energy_line(result.energy), said)
    return (
        f"llem: {what_ran(result)}: "
        f"{w.requests} requests, {w.output_tokens} output tokens in "
        f"{result.latency.generate_s or 0.0:.2f} s = {rate or 0.0:.1f} tokens/s\n"
        + (f"{serving}\n" if serving else "")
        + (f"{energy}\n" if energy else "")
        + (f"{node}\n" if (node := boundary_line(result)) else "")
        + (f"{quality}\n" if (quality := quality_line(result)) else "")
        + (f"{spec}\n" if (spec := speculative_line(result)) else "")
        + "".join(f"{line}\n" for line in footprint_lines(result))
        + f"result: {Path(run_dir) / 'result.json'}"
    )


def speculative_line(result: RunResult) -> str | None:
    """``speculative=ngram: 120 of 300 draft tokens accepted (acceptance 0.40), 1.85 tokens
    per target step (65 target steps saved)``; None when the run did not speculate."""
    s = result.speculative
    if s is None:
        return None
    rate = "n/a" if s.acceptance_rate is None else f"{s.acceptance_rate:.2f}"
    per_step = "n/a" if s.tokens_per_target_step is None else f"{s.tokens_per_target_step:.2f}"
    return (
        f"speculative={s.method}: {s.draft_tokens_accepted} of {s.draft_tokens_proposed} draft "
        f"tokens accepted (acceptance {rate}), {per_step} tokens per target step "
        f"({s.target_steps_saved} target steps saved)"
    )


def _over(n_items: int | None, n_answers: int) -> str:
    """`` over N items`` where the answers repeat items (a window of several passes)."""
    return f" over {n_items} items" if n_items is not None and n_items != n_answers else ""
