"""The one-line summary a single run prints."""

from __future__ import annotations

from pathlib import Path

from llem.result import RunResult


def summary_line(result: RunResult, run_dir: Path) -> str:
    w, t, e = result.workload, result.throughput, result.energy
    total, jpt = e.total_j, e.j_per_output_token
    if e.source == "unavailable":
        energy = f"energy unavailable: {e.unavailable_reason}"
        if e.cpu_package_j is not None:
            energy += f"; CPU package {e.cpu_package_j:.1f} J (RAPL)"
    elif total is None:
        energy = f"energy not measured ({e.source}): " + "; ".join(e.warnings)
    else:
        energy = f"energy {total:.1f} J ({e.source})" + (
            f", {jpt:.4f} J/token" if jpt is not None else ""
        )
    rate = t.output_tokens_per_s
    return (
        f"llem: {result.model} on {result.device} ({result.dtype}): "
        f"{w.requests} requests, {w.output_tokens} output tokens in "
        f"{result.latency.generate_s or 0.0:.2f} s = {rate or 0.0:.1f} tokens/s; "
        f"{energy}\nresult: {Path(run_dir) / 'result.json'}"
    )
