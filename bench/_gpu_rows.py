"""Rows of the GPU acceptance table for scored runs, the measurement boundary, the layers beyond
it with carbon and cost, and speculative decoding.

* quality: a scored run on the GPU whose answers are right by construction on half the prompts
  (a ``regex`` scorer with references that match any answer, ``[\\s\\S]*``, or none, ``(?!)``):
  ``quality.n_correct`` must be exactly half of ``n_answers``, and ``j_per_correct_answer`` must be
  the window's measured ``energy.total_j`` over that count, its bound ``total_j_uncertainty`` over
  the same count.
* boundary: a ``measurement.boundary=node`` run: its ``boundary.gpu_j`` must be ``energy.total_j``,
  and each CPU package and DRAM figure a number or null with its reason (RAPL needs root and
  /sys/class/powercap; on machines without them the reason is the figure).
* layers, carbon, cost: ``measurement.boundary=node`` with ``chassis.source=auto``, a PUE, a
  grid intensity and a price stated here: every layer labelled, or null with its reason; the
  facility the widest other layer times the PUE; grams and dollars the footprint layer's joules
  times the stated intensity and price.
* speculative=ngram: prompt lookup on the small model at batch 1; J per accepted draft token is
  the window's energy over the accepted tokens (null with its reason where none was accepted).
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


#: the footprint row's stated figures (the acceptance run's own, no grid's or market's)
PUE, INTENSITY_G_PER_KWH, USD_PER_KWH = 1.2, 400.0, 0.15


def footprint_row(out: Path, base: list[str]) -> Row:
    """``measurement.boundary=node`` with a PUE, a grid intensity and a price: every layer has a
    label and a figure or a null reason; the facility is the widest other layer with a figure
    times the PUE (modelled); carbon and energy cost are the footprint layer's joules times the
    stated intensity and price."""
    run_dir = out / "run"
    _, last = llem(
        *base,
        "measurement.boundary=node",
        "chassis.source=auto",
        f"facility.pue={PUE}",
        f"carbon.intensity_g_per_kwh={INTENSITY_G_PER_KWH}",
        "carbon.label=gpu-acceptance-stated",
        f"cost.usd_per_kwh={USD_PER_KWH}",
        f"hydra.run.dir={run_dir}",
    )
    r = read(run_dir, last)
    layers, fp = get(r, "layers") or {}, get(r, "footprint") or {}
    reasons = r.get("null_reasons") or {}
    parts, explained = [], True
    for name in ("gpu", "node", "chassis", "facility"):
        value, label = layers.get(f"{name}_j"), layers.get(f"{name}_label")
        why = reasons.get(f"layers.{name}_j")
        explained &= value is not None or bool(why)
        parts.append(
            f"{name} {fmt(value)} J ({label})" if value is not None else f"{name} null ({why})"
        )
    widest = layers.get("widest_measured")
    base_j = (
        layers.get("chassis_j")
        if layers.get("chassis_j") is not None
        else layers.get(f"{widest}_j")
    )
    facility_ok = layers.get("facility_label") == "modelled" and _close(
        layers.get("facility_j"), (base_j or math.nan) * PUE, 1e-9
    )
    energy_j = fp.get("energy_j")
    carbon_ok = _close(
        fp.get("carbon_g"), (energy_j or math.nan) / 3.6e6 * INTENSITY_G_PER_KWH, 1e-9
    )
    cost_ok = _close(fp.get("energy_cost_usd"), (energy_j or math.nan) / 3.6e6 * USD_PER_KWH, 1e-9)
    figure = (
        "; ".join(parts)
        + f"; widest measured {widest}; carbon {fmt(fp.get('carbon_g'))} g from the "
        + f"{fp.get('layer')} layer ({fp.get('layer_label')}); "
        + f"energy cost {fmt(fp.get('energy_cost_usd'))} USD"
        if layers
        else f"no layers section ({last})"
    )
    return Row(
        "layers, carbon, cost",
        figure,
        "each layer labelled or null with why; facility = layer x PUE; g, USD = J x stated",
        bool(layers) and explained and facility_ok and carbon_ok and cost_ok,
        verdict(r),
    )


def speculative_row(out: Path, small: list[str]) -> Row:
    """``speculative=ngram`` (prompt lookup) on the small model at batch 1: the section's counts
    add up (generated = accepted + target steps) and J per accepted draft token is the window's
    energy over the accepted tokens (null with its reason where none was accepted)."""
    run_dir = out / "run"
    batch_one = [
        *[o for o in small if not o.startswith("pytorch.batch_size")],
        "pytorch.batch_size=1",
    ]
    _, last = llem(*batch_one, "speculative=ngram", f"hydra.run.dir={run_dir}")
    r = read(run_dir, last)
    s = get(r, "speculative") or {}
    accepted, proposed = s.get("draft_tokens_accepted"), s.get("draft_tokens_proposed")
    j = s.get("j_per_accepted_draft_token")
    total = get(r, "energy.total_j")
    why = (r.get("null_reasons") or {}).get("speculative.j_per_accepted_draft_token")
    exact = _close(j, (total or math.nan) / accepted, 1e-6) if accepted else j is None and bool(why)
    figure = (
        f"{accepted}/{proposed} proposals accepted (rate {fmt(s.get('acceptance_rate'))}); "
        + (
            f"{fmt(j)} J per accepted draft token = total_j {fmt(total)} J / {accepted}"
            if accepted
            else f"J per accepted token null ({why})"
        )
        if s
        else f"no speculative section ({last})"
    )
    return Row(
        "speculative=ngram",
        figure,
        "J/accepted draft token = total_j / accepted (or null with its reason)",
        bool(s) and isinstance(proposed, int) and bool(exact),
        verdict(r),
    )
