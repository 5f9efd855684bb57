"""GPU acceptance of llem's measurements: one command, one table.

    python bench/gpu_acceptance.py               # on a machine with a CUDA GPU and NVML
    python bench/gpu_acceptance.py --quick       # shorter windows and fewer batch sizes

Drives llem exactly as a user does (``python -m llem ...`` in a subprocess, one run per process)
and reads each run's result.json and timeseries.csv. Rows:

* counter vs power: NVML's energy counter against the trapezoid integral of the sampled power
  (timeseries.csv) over one steady window of at least 30 s; target: within 2%.
* repeatability: coefficient of variation of J/output token over 5 repeats; target: under 3%.
* batch scaling: J/output token at batch size 1, 2, 4, ..., 64 on the default model; it must fall
  as the batch grows.
* bnb-4bit and torch.compile: the run's labels (result.json ``quantization`` and
  ``lifecycle.torch_compile``) against what can be checked (peak allocated memory below the
  unquantised run's; a compile label of "active" only when the run did not fall back).
* validity: each run's ``validity.energy_valid`` and problems.

Without a CUDA GPU it says so and exits 0. The table ends with one verdict line per check ("met" /
"NOT met"; a check whose figure could not be had is not met); exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _verdict import Check, report

from llem.testing import cli


@dataclass
class Row:
    check: str
    figure: str
    target: str
    ok: bool | None  # None: informational
    validity: str = ""
    notes: list[str] = field(default_factory=list)


def no_gpu_reason() -> str | None:
    try:
        import torch
    except ImportError as exc:
        return f"torch is not importable ({exc})"
    if not torch.cuda.is_available():
        return "torch.cuda.is_available() is False"
    from llem.measure.nvml import NvmlUnavailable, system_snapshot

    try:
        snap = system_snapshot()
    except NvmlUnavailable as exc:
        return f"NVML is unavailable ({exc})"
    return None if snap["gpus"] else "NVML sees no GPU"


def run_llem(out: Path, *overrides: str, timeout_s: int = 900) -> dict[str, Any]:
    """One llem run into ``out``; its result.json (or a failed stand-in with the error)."""
    print("  $ python -m llem " + " ".join(overrides), flush=True)
    try:
        proc = cli.run_llem(f"hydra.run.dir={out}", *overrides, timeout=timeout_s, offline=False)
    except subprocess.TimeoutExpired:
        return {"status": "failed", "error": {"message": f"timed out after {timeout_s} s"}}
    path = out / "result.json"
    if path.exists():
        result = json.loads(path.read_text())
        result["_dir"] = str(out)
        return result
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    return {
        "status": "failed",
        "error": {"message": lines[-1] if lines else f"exit {proc.returncode}"},
    }


def verdict(result: dict[str, Any]) -> str:
    if result.get("status") != "ok":
        return f"run failed: {result.get('error', {}).get('message')}"
    v = result.get("validity") or {}
    valid = v.get("energy_valid")
    text = {True: "valid", False: "INVALID", None: "no verdict"}[valid]
    return text + ("" if not v.get("problems") else ": " + " | ".join(v["problems"]))


def integrated_power_j(run_dir: Path) -> float | None:
    """Trapezoid integral of timeseries.csv's power, summed over devices (J)."""
    per_device: dict[str, list[tuple]] = {}
    with (run_dir / "timeseries.csv").open() as fh:
        for row in csv.DictReader(fh):
            if row["power_w"]:
                per_device.setdefault(row["device"], []).append(
                    (float(row["time_s"]), float(row["power_w"]))
                )
    if not per_device:
        return None
    total = 0.0
    for pts in per_device.values():
        pts.sort()
        total += sum(
            (p0 + p1) / 2 * (t1 - t0) for (t0, p0), (t1, p1) in zip(pts, pts[1:], strict=False)
        )
    return total


def jpt(result: dict[str, Any]) -> float | None:
    return (
        (result.get("energy") or {}).get("j_per_output_token")
        if result.get("status") == "ok"
        else None
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="shorter windows, fewer batch sizes")
    ap.add_argument("--out", type=Path, help="keep the run directories here")
    ap.add_argument("overrides", nargs="*", help="extra llem overrides for every run")
    args = ap.parse_args()

    reason = no_gpu_reason()
    if reason:
        print(f"gpu_acceptance: no CUDA GPU here ({reason}); nothing to measure.")
        return 0

    base = list(args.overrides) + ["measurement.energy=nvml"]
    steady_s = 30 if not args.quick else 10
    window_s = 10 if not args.quick else 5
    batches = [1, 2, 4, 8, 16, 32, 64] if not args.quick else [1, 8, 64]
    rows: list[Row] = []
    out_root = args.out or Path(tempfile.mkdtemp(prefix="llem-gpu-acceptance-"))
    out_root.mkdir(parents=True, exist_ok=True)
    print(f"run directories under {out_root}")

    rows.append(counter_vs_power(out_root, base, steady_s))
    rows.append(repeatability(out_root, base, window_s))
    by_batch = batch_scaling(out_root, base, window_s, batches, rows)
    rows.extend(labels(out_root, base, window_s, by_batch.get(8) or by_batch[batches[0]]))
    print_table(rows)
    checks = [Check(r.check, r.figure, r.target, r.ok) for r in rows]
    return 0 if report(checks) else 1


def counter_vs_power(out_root: Path, base: list[str], steady_s: int) -> Row:
    """1. The counter against integrated power over one steady window."""
    r = run_llem(
        out_root / "steady",
        *base,
        f"measurement.min_window_s={steady_s}",
        "measurement.warmup=3",
        "measurement.sample_hz=50",
    )
    if r.get("status") == "ok" and r["energy"].get("total_j") is not None:
        counter = r["energy"]["total_j"]
        integ = integrated_power_j(Path(r["_dir"]))
        diff = None if not integ else (integ - counter) / counter
        return Row(
            "counter vs power",
            f"counter {counter:.1f} J, integrated {integ or float('nan'):.1f} J, "
            f"diff {diff if diff is not None else float('nan'):+.2%} over "
            f"{r['energy']['window_s']:.1f} s ({r['energy']['source']})",
            "|diff| <= 2%",
            None if diff is None else abs(diff) <= 0.02,
            verdict(r),
        )
    return Row("counter vs power", "no energy", "|diff| <= 2%", False, verdict(r))


def repeatability(out_root: Path, base: list[str], window_s: int) -> Row:
    """2. Repeatability: the spread of J/token over five runs."""
    reps = [
        run_llem(
            out_root / f"repeat{i}", *base, f"measurement.min_window_s={window_s}", f"repeat={i}"
        )
        for i in range(5)
    ]
    vals = [v for v in (jpt(x) for x in reps) if v is not None]
    cv = statistics.stdev(vals) / statistics.mean(vals) if len(vals) >= 2 else None
    return Row(
        "repeatability (5 runs)",
        "CV of J/token "
        + ("n/a" if cv is None else f"{cv:.2%} (mean {statistics.mean(vals):.5f} J/token)"),
        "CV < 3%",
        None if cv is None else cv < 0.03,
        "; ".join(sorted({verdict(x) for x in reps})),
    )


def batch_scaling(
    out_root: Path, base: list[str], window_s: int, batches: list[int], rows: list[Row]
) -> dict[int, dict[str, Any]]:
    """3. J/token against the batch size (appends its row; returns the runs)."""
    by_batch: dict[int, dict[str, Any]] = {}
    for b in batches:
        by_batch[b] = run_llem(
            out_root / f"batch{b}",
            *base,
            f"pytorch.batch_size={b}",
            f"dataset.n_prompts={max(64, b)}",
            f"measurement.min_window_s={window_s}",
        )
    series = [(b, jpt(x)) for b, x in by_batch.items()]
    known = [v for _, v in series if v is not None]
    falls = len(known) == len(series) and all(a > b for a, b in zip(known, known[1:], strict=False))
    rows.append(
        Row(
            "J/token vs batch size",
            ", ".join(f"{b}: {'n/a' if v is None else f'{v:.5f}'}" for b, v in series),
            "falls as batch grows",
            falls,
            "; ".join(sorted({verdict(x) for x in by_batch.values()})),
        )
    )
    return by_batch


def labels(out_root: Path, base: list[str], window_s: int, plain: dict[str, Any]) -> list[Row]:
    """4. Labels that must tell the truth: bnb-4bit and torch.compile."""
    rows: list[Row] = []
    q = run_llem(
        out_root / "bnb4", *base, "quantization=bnb-4bit", f"measurement.min_window_s={window_s}"
    )
    if q.get("status") == "ok":
        mem_q = (q.get("memory") or {}).get("peak_allocated_mb")
        mem_p = (plain.get("memory") or {}).get("peak_allocated_mb")
        smaller = mem_q is not None and mem_p is not None and mem_q < mem_p
        rows.append(
            Row(
                "bnb-4bit label",
                f"quantization={q.get('quantization')!r}, peak allocated {mem_q} MB "
                f"(unquantised batch run: {mem_p} MB)",
                "label bnb-4bit and less memory",
                "4" in str(q.get("quantization")) and smaller,
                verdict(q),
            )
        )
    else:
        rows.append(Row("bnb-4bit label", "run failed", "label tells the truth", None, verdict(q)))
    c = run_llem(
        out_root / "compile",
        *base,
        "pytorch.torch_compile=true",
        f"measurement.min_window_s={window_s}",
        timeout_s=1200,
    )
    label = (c.get("lifecycle") or {}).get("torch_compile")
    log = Path(c.get("_dir", out_root)) / "llem.log"
    fell_back = log.exists() and "fall" in log.read_text().lower()
    rows.append(
        Row(
            "torch.compile label",
            f"lifecycle.torch_compile={label!r}; fallback in llem.log: {fell_back}",
            "label matches what ran",
            None if c.get("status") != "ok" else (str(label).startswith("active") != fell_back),
            verdict(c),
        )
    )
    return rows


def print_table(rows: list[Row]) -> None:
    """5. The table."""
    print()
    header = f"{'check':24} {'result':8} {'target':30} figure / validity"
    print(header)
    print("-" * len(header))
    for row in rows:
        ok = {True: "PASS", False: "FAIL", None: "info"}[row.ok]
        print(f"{row.check:24} {ok:8} {row.target:30} {row.figure}")
        print(f"{'':24} {'':8} {'':30} validity: {row.validity}")


if __name__ == "__main__":
    sys.exit(main())
