"""Rows of the GPU acceptance table for scored runs and the measurement boundary.

* quality: a scored run on the GPU whose answers are right by construction on half the prompts
  (a ``regex`` scorer with references that match any answer, ``[\\s\\S]*``, or none, ``(?!)``):
  ``quality.n_correct`` must be exactly half of ``n_answers``, and ``j_per_correct_answer`` must be
  the window's measured ``energy.total_j`` over that count, its bound ``total_j_uncertainty`` over
  the same count.
* boundary: a ``measurement.boundary=node`` run: its ``boundary.gpu_j`` must be ``energy.total_j``,
  and each CPU package and DRAM figure a number or null with its reason (RAPL needs root and
  /sys/class/powercap; on machines without them the reason is the figure).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from gpu_acceptance import Row, fmt, get, llem, read, verdict

ALWAYS, NEVER = r"[\s\S]*", r"(?!)"
N_PROMPTS = 16


def _close(a: Any, b: Any, rel: float = 1e-3) -> bool:
    return (
        isinstance(a, (int, float))
        and isinstance(b, (int, float))
        and math.isclose(a, b, rel_tol=rel)
    )


def quality_row(out: Path, base: list[str]) -> Row:
    out.mkdir(parents=True, exist_ok=True)
    data = out / "half_right.jsonl"
    lines = [
        json.dumps(
            {
                "prompt": f"Write a sentence about the number {i}.",
                "reference": ALWAYS if i % 2 == 0 else NEVER,
            }
        )
        for i in range(N_PROMPTS)
    ]
    data.write_text("\n".join(lines) + "\n")
    run_dir = out / "run"
    _, last = llem(
        *base,
        "dataset=jsonl",
        f"dataset.path={data}",
        "dataset.scorer=regex",
        f"hydra.run.dir={run_dir}",
    )
    r = read(run_dir, last)
    q = get(r, "quality") or {}
    total, bound = get(r, "energy.total_j"), get(r, "energy.total_j_uncertainty")
    n, right = q.get("n_answers"), q.get("n_correct")
    j, j_bound = q.get("j_per_correct_answer"), q.get("j_per_correct_answer_uncertainty")
    planted = isinstance(n, int) and n > 0 and right == n // 2
    exact = planted and _close(j, total / right) and _close(j_bound, (bound or math.nan) / right)
    figure = (
        f"{right}/{n} right (planted: half); {fmt(j)} ± {fmt(j_bound, '.2g')} J per correct answer "
        f"= total_j {fmt(total)} J / {right}; {q.get('interval_method')}"
        if q
        else f"no quality section ({last})"
    )
    return Row(
        "quality: J per correct answer",
        figure,
        "count as planted; total_j / n_correct (bound likewise) within 0.1%",
        bool(exact),
        verdict(r),
    )


def boundary_row(out: Path, base: list[str]) -> Row:
    run_dir = out / "run"
    _, last = llem(*base, "measurement.boundary=node", f"hydra.run.dir={run_dir}")
    r = read(run_dir, last)
    b = get(r, "boundary") or {}
    reasons = r.get("null_reasons") or {}
    parts = []
    explained = True
    for key in ("cpu_package_j", "dram_j", "total_j"):
        value = b.get(key)
        why = reasons.get(f"boundary.{key}")
        explained &= value is not None or bool(why)
        parts.append(f"{key} {fmt(value)}" if value is not None else f"{key} null ({why})")
    gpu_ok = _close(b.get("gpu_j"), get(r, "energy.total_j"), 1e-9)
    figure = (
        f"gpu_j {fmt(b.get('gpu_j'))} J (= energy.total_j: {gpu_ok}); "
        + "; ".join(parts)
        + f"; packages read {b.get('cpu_packages')}, DRAM {b.get('dram')}"
        if b
        else f"no boundary section ({last})"
    )
    return Row(
        "boundary=node",
        figure,
        "gpu_j = energy.total_j; every CPU/DRAM figure a number or null with its reason",
        bool(b) and gpu_ok and explained,
        verdict(r),
    )
