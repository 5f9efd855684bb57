"""GPU acceptance of llem's measurements: one command, one table, no model download.

    bash scripts/gpu_acceptance.sh                 # the GPU tests, then this table
    python bench/gpu_acceptance.py                 # the table alone
    python bench/gpu_acceptance.py --architecture llama-3.2-1b   # a smaller stand-in

Drives llem as a user does (``python -m llem ...`` in subprocesses) on a random-weight model
(``model.weights=random``, default Llama-3.1-8B in bfloat16: no download, no network) and reads
each run's result.json and timeseries.csv. Rows:

* counter vs power: NVML's energy counter against the trapezoid integral of the sampled power
  (timeseries.csv, 50 Hz) over each window of the batch sweep (at least 30 s); target: within 2%.
* J/token vs batch: J/output token at batch 1, 8 and 64 (one ``--multirun``, the model loaded
  once); it must fall as the batch grows. Printed beside ML.ENERGY v3's Llama-3.1-8B on one H100
  (vLLM: 0.455 J/token at batch 8, 0.119 at 64); llem's figure here is transformers' static batch
  on random weights, so it is a stand-in of the same order, not the same measurement.
* power limit: one run at batch 64 under ``gpu.power_limit_w`` (a quarter up NVML's allowed
  range): the enforced limit recorded must be the one asked for, and the limit read from NVML
  after the run must be the one before it. Its J/token and tokens/s are printed beside the
  unlimited batch-64 run.
* energy attribution (information): the batch-64 run's J per prefill and per decode token and the
  fit's R² (``energy.fit``).
* bnb-4bit (if bitsandbytes imports): the label and less memory than the unquantised run.
* torch.compile: the label read from ``lifecycle.torch_compile`` against the run's log.
* vLLM steady state (if vllm imports): ``steady_state.j_per_output_token`` of a Poisson run.
* quality, boundary=node, layers/carbon/cost and speculative=ngram: ``bench/_gpu_rows.py``.

Without a CUDA GPU it says so and exits 0. The table ends with one verdict line per check ("met" /
"NOT met"; a check whose figure could not be had is not met); exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _verdict import Check, report

from llem.testing import cli

BATCHES = (1, 8, 64)
GROUPS = (
    "batch",
    "small",
    "vllm",
    "quality",
    "boundary",
    "footprint",
    "speculative",
)  # --only picks among them
MLENERGY_H100_VLLM = {8: 0.455, 64: 0.119}  # ML.ENERGY v3, Llama-3.1-8B, one H100, J/token


@dataclass
class Row:
    check: str
    figure: str
    target: str
    ok: bool | None  # None: information only
    validity: str = ""


def no_gpu_reason() -> str | None:
    try:
        import torch
    except ImportError as exc:
        return f"torch is not importable ({exc})"
    if not torch.cuda.is_available():
        return "torch.cuda.is_available() is False"
    from llem.devices.gpu import GpuUnavailable
    from llem.devices.gpus import open_gpus

    try:
        lib = open_gpus()
    except GpuUnavailable as exc:
        return f"no GPU library can start ({exc})"
    try:
        return None if lib.gpus() else f"{lib.api} sees no GPU"
    finally:
        lib.shutdown()


def llem(*overrides: str, timeout_s: int = 900) -> tuple[int, str]:
    """``python -m llem OVERRIDES``; its exit code and the last line of its stderr."""
    print("  $ python -m llem " + " ".join(overrides), flush=True)
    t0 = time.perf_counter()
    try:
        proc = cli.run_llem(*overrides, timeout=timeout_s, offline=True)
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout_s} s"
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    print(f"    exit {proc.returncode} in {time.perf_counter() - t0:.0f} s", flush=True)
    return proc.returncode, lines[-1] if lines else ""


def read(run_dir: Path, why: str = "") -> dict[str, Any]:
    path = run_dir / "result.json"
    if not path.exists():
        return {"status": "failed", "error": {"message": why or f"no result in {run_dir}"}}
    result = json.loads(path.read_text())
    result["_dir"] = str(run_dir)
    return result


def verdict(result: dict[str, Any]) -> str:
    if result.get("status") != "ok":
        return f"run failed: {(result.get('error') or {}).get('message')}"
    v = result.get("validity") or {}
    text = {True: "valid", False: "INVALID", None: "no verdict"}[v.get("energy_valid")]
    return text + ("" if not v.get("problems") else ": " + " | ".join(v["problems"]))


def integrated_power_j(run_dir: Path) -> float | None:
    """Trapezoid integral of timeseries.csv's power, summed over devices (J)."""
    per_device: dict[str, list[tuple[float, float]]] = {}
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


def get(result: dict[str, Any], dotted: str) -> Any:
    node: Any = result if result.get("status") == "ok" else {}
    for key in dotted.split("."):
        node = node.get(key) if isinstance(node, dict) else None
    return node


def fmt(value: float | None, spec: str = ".4g") -> str:
    return "n/a" if value is None else format(value, spec)


# --------------------------------------------------------------------------- the runs


def batch_sweep(out: Path, base: list[str]) -> dict[int, dict[str, Any]]:
    """J/token at batch 1, 8, 64 in one sweep (the model loaded once)."""
    code, why = llem(
        "--multirun",
        *base,
        # windows of at least 30 s: on an H100 a 10.5 s batch-64 window put the power integral
        # 2.2% under the counter, a 30 s one 0.3%
        "measurement.min_window_s=30",
        f"hydra.sweep.dir={out}",
        "pytorch.batch_size=" + ",".join(str(b) for b in BATCHES),
    )
    runs = [read(d, why) for d in sorted(out.glob("[0-9]*"), key=lambda p: int(p.name))]
    return {int(get(r, "workload.batch_size") or -1): r for r in runs if r.get("status") == "ok"}


def counter_rows(by_batch: dict[int, dict[str, Any]]) -> list[Row]:
    figures, oks = [], []
    for b in BATCHES:
        r = by_batch.get(b, {})
        counter = get(r, "energy.total_j")
        integ = integrated_power_j(Path(r["_dir"])) if r.get("_dir") else None
        if counter and integ:
            diff = (integ - counter) / counter
            oks.append(abs(diff) <= 0.02)
            figures.append(f"batch {b}: {counter:.0f} J vs {integ:.0f} J ({diff:+.2%})")
        else:
            oks.append(False)
            figures.append(f"batch {b}: n/a")
    return [Row("counter vs power", "; ".join(figures), "|diff| <= 2% each", all(oks))]


def batch_row(by_batch: dict[int, dict[str, Any]]) -> Row:
    series = [(b, get(by_batch.get(b, {}), "energy.j_per_output_token")) for b in BATCHES]
    known = [v for _, v in series if v is not None]
    falls = len(known) == len(series) and all(a > b for a, b in zip(known, known[1:], strict=False))
    parts = []
    for b, v in series:
        tps = get(by_batch.get(b, {}), "throughput.output_tokens_per_s")
        anchor = MLENERGY_H100_VLLM.get(b)
        parts.append(
            f"{b}: {fmt(v)} J/tok, {fmt(tps, '.0f')} tok/s"
            + (f" (ML.ENERGY vLLM: {anchor})" if anchor else "")
        )
    valid = "; ".join(sorted({verdict(x) for x in by_batch.values()})) or "no run"
    return Row("J/token vs batch", " | ".join(parts), "falls as batch grows", falls, valid)


def power_limit_row(out: Path, base: list[str], unlimited: dict[str, Any]) -> Row:
    """One run under a lower power limit: enforced as asked, put back afterwards."""
    before, lo, hi = nvml_power_limit()
    target = round((lo + (hi - lo) / 4) / 10) * 10
    code, why = llem(
        *base, f"hydra.run.dir={out}", "pytorch.batch_size=64", f"gpu.power_limit_w={target}"
    )
    r = read(out, why)
    after, _, _ = nvml_power_limit()
    devices = get(r, "gpu.devices") or {}
    enforced = [d.get("enforced_power_limit_w") for d in devices.values()]
    ok = bool(enforced) and all(e is not None and abs(e - target) <= 1 for e in enforced)
    restored = abs(after - before) <= 1
    jpt, tps = (get(r, "energy.j_per_output_token"), get(r, "throughput.output_tokens_per_s"))
    jpt0 = get(unlimited, "energy.j_per_output_token")
    tps0 = get(unlimited, "throughput.output_tokens_per_s")
    return Row(
        "power limit",
        f"asked {target} W, enforced {enforced}; limit before {before:.0f} W, after {after:.0f} W; "
        f"batch 64: {fmt(jpt)} J/tok, {fmt(tps, '.0f')} tok/s (at {before:.0f} W: {fmt(jpt0)} "
        f"J/tok, {fmt(tps0, '.0f')} tok/s)",
        "enforced as asked, then restored",
        ok and restored,
        verdict(r),
    )


def nvml_power_limit() -> tuple[float, float, float]:
    """GPU 0's power limit and its allowed range (W), read from NVML directly."""
    import pynvml

    pynvml.nvmlInit()
    try:
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        lo, hi = pynvml.nvmlDeviceGetPowerManagementLimitConstraints(h)
        return pynvml.nvmlDeviceGetPowerManagementLimit(h) / 1000, lo / 1000, hi / 1000
    finally:
        pynvml.nvmlShutdown()


def attribution_row(r: dict[str, Any]) -> Row:
    a, b = get(r, "energy.j_per_prefill_token"), get(r, "energy.j_per_decode_token")
    fit = get(r, "energy.fit") or {}
    r2 = fit.get("r2") if isinstance(fit, dict) else None
    r2 = r2.get("value") if isinstance(r2, dict) else r2
    split = [get(r, f"energy.{k}") for k in ("prefill_j", "decode_j", "between_steps_j")]
    return Row(
        "energy attribution",
        f"batch 64: {fmt(_value(a))} J/prefill tok, {fmt(_value(b))} J/decode tok, R² {fmt(r2)}; "
        f"prefill/decode/between {' / '.join(fmt(_value(x), '.0f') for x in split)} J",
        "information",
        None,
        verdict(r),
    )


def _value(x: Any) -> float | None:
    return x.get("value") if isinstance(x, dict) else x


def small_model_rows(out: Path, small: list[str]) -> list[Row]:
    """bnb-4bit (when bitsandbytes imports) and torch.compile, on a small random model."""
    rows = []
    if importlib.util.find_spec("bitsandbytes") is None:
        rows.append(Row("bnb-4bit label", "bitsandbytes is not installed: not checked", "", None))
    else:
        code, why = llem(*small, f"hydra.run.dir={out / 'plain'}")
        plain = read(out / "plain", why)
        code, why = llem(*small, f"hydra.run.dir={out / 'bnb4'}", "quantization=bnb-4bit")
        q = read(out / "bnb4", why)
        mem_q, mem_p = get(q, "memory.peak_allocated_mb"), get(plain, "memory.peak_allocated_mb")
        label = get(q, "quantization")
        ok = "4" in str(label) and mem_q is not None and mem_p is not None and mem_q < mem_p
        rows.append(
            Row(
                "bnb-4bit label",
                f"quantization={label!r}, peak allocated {mem_q} MB (unquantised: {mem_p} MB)",
                "label bnb-4bit and less memory",
                ok,
                verdict(q),
            )
        )
    code, why = llem(
        *small, f"hydra.run.dir={out / 'compile'}", "pytorch.torch_compile=true", timeout_s=900
    )
    c = read(out / "compile", why)
    label = (c.get("lifecycle") or {}).get("torch_compile")
    log = out / "compile" / "llem.log"
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


def vllm_row(out: Path, architecture: str) -> Row:
    if importlib.util.find_spec("vllm") is None:
        return Row("vLLM steady state", "vllm is not installed: not checked", "", None)
    code, why = llem(
        "+backend=vllm",
        "device=cuda",
        "model.weights=random",
        f"model.architecture={architecture}",
        "traffic=poisson",
        "traffic.rate_per_s=16",
        "traffic.n_requests=512",
        "measurement.energy=nvml",
        f"hydra.run.dir={out}",
        timeout_s=900,
    )
    r = read(out, why)
    jpt = get(r, "steady_state.j_per_output_token")
    return Row(
        "vLLM steady state",
        f"steady_state.j_per_output_token {fmt(_value(jpt))} at 16 req/s (ML.ENERGY vLLM: "
        f"{MLENERGY_H100_VLLM[8]} at batch 8, {MLENERGY_H100_VLLM[64]} at 64)",
        "a steady state with energy",
        _value(jpt) is not None,
        verdict(r),
    )


# --------------------------------------------------------------------------- the table


def print_table(rows: list[Row]) -> None:
    print()
    header = f"{'check':20} {'result':6} {'target':32} figure / validity"
    print(header)
    print("-" * len(header))
    for row in rows:
        ok = {True: "PASS", False: "FAIL", None: "info"}[row.ok]
        print(f"{row.check:20} {ok:6} {row.target:32} {row.figure}")
        if row.validity:
            print(f"{'':20} {'':6} {'':32} validity: {row.validity}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--architecture", default="llama-3.1-8b", help="random-weight model")
    ap.add_argument("--small", default="smollm2-135m", help="model for the compile/4-bit rows")
    ap.add_argument("--out", type=Path, help="keep the run directories here")
    ap.add_argument(
        "--only",
        default=",".join(GROUPS),
        help=f"the groups of rows to run, comma-separated (default all: {','.join(GROUPS)})",
    )
    ap.add_argument("overrides", nargs="*", help="extra llem overrides for every run")
    args = ap.parse_args()

    reason = no_gpu_reason()
    if reason:
        print(f"gpu_acceptance: no CUDA GPU here ({reason}); nothing to measure.")
        return 0
    common = ["device=cuda", "measurement.energy=nvml", "model.weights=random", *args.overrides]
    # a fixed workload: 64 prompts of 128 tokens, 32 new tokens each (random weights never stop
    # early), power sampled at 50 Hz, windows of at least 10 s
    work = [
        "dataset=synthetic",
        "dataset.n_prompts=64",
        "dataset.input_tokens=128",
        "decoder.max_new_tokens=32",
        "measurement.sample_hz=50",
        "measurement.min_window_s=10",
    ]
    base = [*common, f"model.architecture={args.architecture}", *work]
    small = [*common, f"model.architecture={args.small}", *work, "pytorch.batch_size=8"]
    out = args.out or Path(tempfile.mkdtemp(prefix="llem-gpu-acceptance-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"run directories under {out}")

    only = set(args.only.split(","))
    rows: list[Row] = []
    if "batch" in only:
        by_batch = batch_sweep(out / "batch", base)
        rows += [*counter_rows(by_batch), batch_row(by_batch)]
        rows.append(power_limit_row(out / "power_limit", base, by_batch.get(64, {})))
        rows.append(attribution_row(by_batch.get(64, {})))
    if "small" in only:
        rows.extend(small_model_rows(out / "small", small))
    if "vllm" in only:
        rows.append(vllm_row(out / "vllm", args.architecture))
    if only & {"quality", "boundary", "footprint", "speculative"}:
        from _gpu_rows import (  # they build on this module's helpers
            boundary_row,
            footprint_row,
            quality_row,
            speculative_row,
        )

        # the small model at batch 8, its answers capped at 32 tokens; each row picks its dataset
        scored = [*common, f"model.architecture={args.small}", "pytorch.batch_size=8"]
        scored += ["decoder.max_new_tokens=32", "measurement.sample_hz=50"]
        scored += ["measurement.min_window_s=10"]
        if "quality" in only:
            rows.append(quality_row(out / "quality", scored))
        if "boundary" in only:
            rows.append(boundary_row(out / "boundary", scored))
        if "footprint" in only:
            rows.append(footprint_row(out / "footprint", scored))
        if "speculative" in only:
            rows.append(speculative_row(out / "speculative", small))
    print_table(rows)
    checks = [Check(r.check, r.figure, r.target, r.ok) for r in rows if r.ok is not None]
    return 0 if report(checks) else 1


if __name__ == "__main__":
    sys.exit(main())
