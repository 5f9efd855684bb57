"""The attribution's energies written into the run's own files: each request's in
``requests.jsonl`` (its energy, bound and interval, or null with the reason) and each step's in
``steps.csv`` (matched on the step's end)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

from llem.figures.attribution import RequestEnergy
from llem.figures.step_shares import StepSpan
from llem.result import (
    RequestRecord,
    RunResult,
    read_requests,
    read_steps,
    write_requests,
    write_steps,
)
from llem.runner.published import unresolved


def write_request_energies(
    result: RunResult,
    run_dir: Path,
    per_request: Mapping[int, RequestEnergy] | None,
    why_none: str | None,
    shares_estimated: str | None,
) -> None:
    """requests.jsonl with each request's energy (null with the reason where there is none:
    ``why_none`` where ``per_request`` is None, ``shares_estimated`` where the engine did not
    say which steps computed each request's prompt)."""
    path = run_dir / "requests.jsonl"
    if not path.exists():
        return
    if per_request is not None and shares_estimated:
        result.null_reasons["requests.energy_j"] = (
            f"not published: the engine did not say which steps computed each request's prompt "
            f"({shares_estimated}), so a request's share of the steps is a guess"
        )
        return
    if per_request is None:
        result.null_reasons["requests.energy_j"] = why_none or "not attributed"
        return
    result.null_reasons.pop("requests.energy_j", None)
    records = []
    for r in read_requests(run_dir):
        got = per_request.get(r.request_id)
        if got is None:
            records.append(r)
            continue
        records.append(request_energy(r, got))
    write_requests(run_dir, records)


def request_energy(r: RequestRecord, got: RequestEnergy) -> RequestRecord:
    """The request's line with its energy, bound and interval, or null with the reason where
    the interval is wider than the energy."""
    why = None if got.ci95_j is None else unresolved(got.energy_j, got.ci95_j)
    if why is not None:
        return dataclasses.replace(r, energy_null_reason=why)
    per_token = got.energy_j / r.output_tokens if r.output_tokens > 0 else None
    return dataclasses.replace(
        r,
        energy_j=round(got.energy_j, 6),
        j_per_output_token=None if per_token is None else round(per_token, 9),
        prefill_j=round(got.prefill_j, 6),
        decode_j=round(got.decode_j, 6),
        bound_j=round(got.bound_j, 6),
        ci95_half_width_j=None if got.ci95_j is None else round(got.ci95_j, 6),
    )


def write_step_energies(
    run_dir: Path, cut: Sequence[StepSpan], energies: Sequence[float | None] | None, origin_s: float
) -> None:
    """steps.csv with each step's energy, matched on the step's end (``origin_s``: the
    window's start on the spans' clock)."""
    if not (run_dir / "steps.csv").exists():
        return
    energies = energies or (None,) * len(cut)
    by_end = {
        round(s.end_s - origin_s, 6): e
        for s, e in zip(cut, energies, strict=True)
        if s.step is not None
    }
    rows = []
    for r in read_steps(run_dir):
        joules = by_end.get(round(r.end_s, 6))
        rows.append(dataclasses.replace(r, energy_j=None if joules is None else round(joules, 6)))
    write_steps(run_dir, rows)
