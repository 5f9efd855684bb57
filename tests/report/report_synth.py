"""Synthetic llem run and sweep directories with known values, laid out like the run code does."""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

GROUPS = {"model", "decoder", "quantization", "dataset", "measurement", "backend", "speculative"}

BASE_CONFIG: dict[str, Any] = {
    "model": {"name_or_path": "HuggingFaceTB/SmolLM2-135M", "dtype": None},
    "backend": "pytorch",
    "pytorch": {"batch_size": 1, "num_beams": None},
    "decoder": {"max_new_tokens": 64, "do_sample": False, "temperature": None},
    "quantization": {"load_in_4bit": False, "load_in_8bit": False},
    "dataset": {"source": "builtin", "n_prompts": 32, "seed": 0},
    "measurement": {"warmup": 1, "energy": "auto"},
    "device": "auto",
    "repeat": 0,
    "dry_run": False,
}
BASE_CHOICES = {
    "model": "smollm2-135m",
    "decoder": "greedy",
    "quantization": "none",
    "dataset": "builtin",
    "measurement": "default",
}


GPU_MODEL = "NVIDIA A100-SXM4-80GB"


def ok_result(
    tok_s: float | None = 200.0,
    j_tok: float | None = 0.7,
    ttft_p50: float | None = 21.0,
    peak_mb: float | None = 900.0,
    energy: bool = True,
    *,
    valid: bool | None = None,
    problems: Sequence[str] = (),
    j_tok_bound: float | None = None,
    gpu_model: str | None = GPU_MODEL,
    gpu_count: int = 1,
    hostname: str = "node-1",
) -> dict[str, Any]:
    """A schema-2 result.json body (without config/overrides) with the given headline figures.

    ``valid`` is the energy verdict (default: true with energy, null without); ``problems`` go
    with a false one. ``j_tok_bound`` is the per-run bound of J/output token (absolute, J); the
    other energy bounds scale with it. ``gpu_model``/``gpu_count`` describe the hardware of a run
    with energy (a CPU run has none).
    """
    out_tokens = 2048
    in_tokens = 1234
    requests = 32
    gen_s = out_tokens / tok_s if tok_s else None
    if valid is None and energy and j_tok is not None:
        valid = True
    result: dict[str, Any] = {
        "schema_version": 2,
        "llem_version": "0.1.0",
        "status": "ok",
        "error": None,
        "started_at": "2026-11-21T10:00:00+00:00",
        "duration_s": 12.3,
        "model": "HuggingFaceTB/SmolLM2-135M",
        "backend": "pytorch",
        "device": "cuda" if energy else "cpu",
        "dtype": "float16",
        "quantization": "none",
        "workload": {
            "n_prompts": 32,
            "batch_size": 4,
            "input_tokens": in_tokens,
            "output_tokens": out_tokens,
            "passes": 1,
            "requests": requests,
        },
        "latency": {
            "generate_s": gen_s,
            "ttft_ms": {
                "p50": ttft_p50,
                "p90": None if ttft_p50 is None else ttft_p50 * 1.2,
                "p99": None if ttft_p50 is None else ttft_p50 * 1.5,
            },
            "itl_ms": {"p50": 9.0, "p90": 11.0, "p99": 14.0},
            "request_latency_s": {"p50": 0.6, "p90": 0.7, "p99": 0.8},
        },
        "throughput": {
            "output_tokens_per_s": tok_s,
            "requests_per_s": None if tok_s is None else tok_s / 64,
            "generate_output_tokens_per_s": None if tok_s is None else tok_s * 1.02,
        },
        "memory": {
            "peak_allocated_mb": peak_mb,
            "peak_reserved_mb": None if peak_mb is None else peak_mb * 1.1,
            "peak_device_used_mb": None if peak_mb is None else peak_mb + 500,
        },
        "thermal": {
            "max_temp_c": 61.0 if energy else None,
            "throttled": False,
            "throttle_reasons": [],
        },
        "compute": {"flops_estimate": 1.2e12, "decode_bandwidth_utilisation": 0.31},
        "validity": {
            "energy_valid": valid,
            "problems": list(problems),
            "checks": {"window_length": "failed" if problems else "passed"} if energy else {},
        },
        "hardware": {
            "hostname": hostname,
            "gpu_model": gpu_model if energy else None,
            "gpu_count": gpu_count if energy and gpu_model else 0,
            "gpus": [{"uuid": f"GPU-{i:04d}", "name": gpu_model} for i in range(gpu_count)]
            if energy and gpu_model
            else [],
        },
        "lifecycle": {"load_s": 3.2, "model_reused": False, "warmup_s": 0.5},
        "null_reasons": {},
    }
    if energy and j_tok is not None:
        total = j_tok * out_tokens
        u_total = None if j_tok_bound is None else j_tok_bound * out_tokens
        result["energy"] = {
            "source": "nvml_counter",
            "unavailable_reason": None,
            "window_s": gen_s,
            "total_j": total,
            "per_device_j": {"GPU-aaaa": total},
            "idle_power_w": 60.0,
            "idle_adjusted_j": total * 0.6,
            "j_per_output_token": j_tok,
            "j_per_total_token": total / (in_tokens + out_tokens),
            "output_tokens_per_j": out_tokens / total,
            "j_per_request": total / requests,
            "wh_per_1k_requests": total / requests * 1000 / 3600,
            "avg_power_w": total / gen_s if gen_s else None,
            "peak_power_w": 1.4 * total / gen_s if gen_s else None,
            "warnings": [],
        }
        if u_total is not None:
            result["energy"].update(
                {
                    "total_j_uncertainty": u_total,
                    "j_per_output_token_uncertainty": j_tok_bound,
                    "j_per_total_token_uncertainty": u_total / (in_tokens + out_tokens),
                    "j_per_request_uncertainty": u_total / requests,
                    "wh_per_1k_requests_uncertainty": u_total / requests * 1000 / 3600,
                    "output_tokens_per_j_uncertainty": out_tokens / (total - u_total)
                    - out_tokens / total,
                    "avg_power_w_uncertainty": u_total / gen_s if gen_s else None,
                    "uncertainty_method": "nvml_counter: 2 x resolution + update period x power",
                }
            )
    else:
        reason = "no NVIDIA GPU (device is cpu)"
        result["energy"] = {
            "source": "unavailable",
            "unavailable_reason": reason,
            "window_s": None,
            "total_j": None,
            "per_device_j": {},
            "idle_power_w": None,
            "idle_adjusted_j": None,
            "j_per_output_token": None,
            "j_per_request": None,
            "avg_power_w": None,
            "peak_power_w": None,
            "warnings": [],
        }
        result["null_reasons"] = {
            "energy.total_j": reason,
            "energy.j_per_output_token": reason,
            "validity.energy_valid": "no energy was measured",
        }
    return result


def failed_result(
    message: str = "CUDA out of memory. Tried to allocate 2.00 GiB",
) -> dict[str, Any]:
    return {
        "schema_version": 2,
        "llem_version": "0.1.0",
        "status": "failed",
        "error": {
            "type": "OutOfMemory",
            "message": message,
            "hint": "lower pytorch.batch_size or use quantization=bnb-4bit",
        },
        "started_at": "2026-11-21T10:00:00+00:00",
        "duration_s": 4.0,
        "model": "HuggingFaceTB/SmolLM2-135M",
        "backend": "pytorch",
        "device": "cuda",
        "throughput": {"output_tokens_per_s": None, "requests_per_s": None},
        "energy": {"source": "nvml_counter", "total_j": None, "j_per_output_token": None},
        "null_reasons": {"throughput.output_tokens_per_s": "the run failed"},
    }


def skipped_result(reason: str = "bnb-4bit needs a CUDA GPU") -> dict[str, Any]:
    return {
        "schema_version": 2,
        "llem_version": "0.1.0",
        "status": "skipped",
        "error": {"type": "ConfigError", "message": reason, "hint": None},
        "started_at": "2026-11-21T10:00:00+00:00",
        "duration_s": 0.0,
    }


def _set(tree: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = tree
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    node[parts[-1]] = value


def config_for(overrides: Sequence[str]) -> tuple:
    """(resolved config, group choices) for a list of override strings."""
    config = copy.deepcopy(BASE_CONFIG)
    choices = dict(BASE_CHOICES)
    for o in overrides:
        key, _, raw = o.lstrip("+").partition("=")
        value = yaml.safe_load(raw)
        if key in GROUPS:
            choices[key] = value
            if key == "quantization":
                config["quantization"]["load_in_4bit"] = value == "bnb-4bit"
        else:
            _set(config, key, value)
    return config, choices


#: left out of the hash, as llem.config.config_hash.config_hash leaves them out: they do not change
#: what is measured (the repeat index, a dry run, the sweep's run order)
HASH_EXCLUDED = ("repeat", "dry_run", "sweep")


def config_hash(config: Mapping[str, Any], choices: Mapping[str, Any]) -> str:
    body = {k: v for k, v in config.items() if k not in HASH_EXCLUDED}
    return hashlib.sha256(
        json.dumps([body, dict(choices)], sort_keys=True, default=str).encode()
    ).hexdigest()[:16]


def write_run(
    run_dir: Path,
    overrides: Sequence[str],
    result: dict[str, Any] | None,
    timeseries: str | None = None,
) -> Path:
    """One run directory: .hydra/{overrides,config,hydra}.yaml, result.json (None: no file)."""
    run_dir = Path(run_dir)
    (run_dir / ".hydra").mkdir(parents=True, exist_ok=True)
    config, choices = config_for(overrides)
    (run_dir / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(list(overrides)))
    (run_dir / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))
    (run_dir / ".hydra" / "hydra.yaml").write_text(
        yaml.safe_dump({"hydra": {"runtime": {"choices": choices}, "mode": "MULTIRUN"}})
    )
    if result is not None:
        body = dict(result)
        body.setdefault("config_hash", config_hash(config, choices))
        body["overrides"] = list(overrides)
        body["config"] = config
        (run_dir / "result.json").write_text(json.dumps(body, indent=1))
    if timeseries is not None:
        (run_dir / "timeseries.csv").write_text(timeseries)
    return run_dir


def write_sweep(
    sweep_dir: Path,
    grid: Mapping[str, Sequence[Any]],
    make_result: Callable[[dict[str, Any]], dict[str, Any] | None],
    repeats: int = 1,
    start: int = 0,
) -> list[Path]:
    """A Hydra-style sweep: one numbered dir per point of ``grid`` × ``repeat``.

    ``make_result`` gets the point as a dict (values as typed, plus ``repeat``) and returns the
    result body, or None for a point that left no result.json.
    """
    sweep_dir = Path(sweep_dir)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    task = [f"{k}={','.join(str(v) for v in vs)}" for k, vs in grid.items()]
    if repeats > 1:
        task.append(f"repeat=range({repeats})")
    (sweep_dir / "multirun.yaml").write_text(
        yaml.safe_dump({"hydra": {"overrides": {"task": task}, "sweep": {"dir": str(sweep_dir)}}})
    )
    keys = list(grid)
    dirs = []
    n = start
    for combo in itertools.product(*(grid[k] for k in keys)):
        for r in range(repeats):
            point = dict(zip(keys, combo, strict=True))
            overrides = [f"{k}={v}" for k, v in point.items()]
            if repeats > 1:
                overrides.append(f"repeat={r}")
            point["repeat"] = r
            dirs.append(write_run(sweep_dir / str(n), overrides, make_result(point)))
            n += 1
    return dirs


# ----------------------------------------------------------------------- a realistic sweep

_TOK_S = {
    (1, "none"): 31.0,
    (4, "none"): 112.0,
    (16, "none"): 386.0,
    (1, "bnb-4bit"): 22.5,
    (4, "bnb-4bit"): 84.0,
    (16, "bnb-4bit"): 301.0,
}
_J_TOK = {
    (1, "none"): 2.10,
    (4, "none"): 0.62,
    (16, "none"): 0.205,
    (1, "bnb-4bit"): 2.62,
    (4, "bnb-4bit"): 0.77,
    (16, "bnb-4bit"): 0.248,
}
_NOISE = (-0.021, 0.004, 0.017)


def realistic_result(point: dict[str, Any]) -> dict[str, Any]:
    key = (point["pytorch.batch_size"], point["quantization"])
    jitter = 1.0 + _NOISE[point["repeat"] % 3]
    bs = point["pytorch.batch_size"]
    peak = (410.0 if point["quantization"] == "none" else 190.0) + 14.0 * bs
    return ok_result(
        tok_s=round(_TOK_S[key] * jitter, 2),
        j_tok=round(_J_TOK[key] / jitter, 4),
        ttft_p50=round(
            (18.0 + 2.5 * bs) * (1.4 if point["quantization"] != "none" else 1.0) * (2 - jitter), 2
        ),
        peak_mb=peak,
    )


def write_realistic_sweep(sweep_dir: Path) -> list[Path]:
    """batch_size 1,4,16 × quantization none,bnb-4bit × 3 repeats, all with energy."""
    return write_sweep(
        sweep_dir,
        {"pytorch.batch_size": [1, 4, 16], "quantization": ["none", "bnb-4bit"]},
        realistic_result,
        repeats=3,
    )


def timeseries_csv(seconds: float = 30.0, hz: float = 10.0, devices: Sequence[int] = (0,)) -> str:
    """A power/temperature trace: idle, ramp to load, load with ripple, back to idle."""
    import math

    lines = [
        "time_s,device,power_w,temperature_c,sm_clock_mhz,mem_clock_mhz,throttle_reasons,"
        "memory_used_mb,gpu_util_pct,mem_util_pct"
    ]
    n = int(seconds * hz)
    for i in range(n):
        t = i / hz
        for d in devices:
            busy = 5.0 <= t <= seconds - 5.0
            power = (62.0 + 8 * d) if not busy else 205.0 + 15 * math.sin(t * 3.1) + 10 * d
            temp = 41.0 + (22.0 * (1 - math.exp(-(t - 5.0) / 8.0)) if t > 5.0 else 0.0)
            if t > seconds - 5.0:
                temp -= (t - (seconds - 5.0)) * 1.5
            lines.append(
                f"{t:.1f},{d},{power:.1f},{temp:.1f},1980,2619,0,1500,"
                f"{95 if busy else 0},{40 if busy else 0}"
            )
    return "\n".join(lines) + "\n"


def write_single_run(run_dir: Path) -> Path:
    """A single (non-sweep) run with energy and a 30 s power/temperature timeline."""
    return write_run(
        run_dir,
        [],
        ok_result(tok_s=204.8, j_tok=0.73, ttft_p50=21.0, peak_mb=900.0),
        timeseries=timeseries_csv(),
    )


# ----------------------------------------------------------------------- serving (schema 3)


def serving_result(
    tok_s: float = 200.0,
    j_tok: float | None = 0.7,
    *,
    kind: str = "poisson",
    rate: float | None = 4.0,
    concurrency: float = 6.0,
    steady: dict[str, float] | None = None,
    goodput: tuple[float, float] | None = None,
    tpot_p90: float = 30.0,
    ttft_p90: float = 80.0,
    energy: bool = True,
    valid: bool | None = None,
) -> dict[str, Any]:
    """A schema-5 result: ``ok_result``'s whole window plus the serving sections.

    ``steady`` (keys tok_s, j_tok, conc) is the steady state's figures (None: no steady state);
    ``goodput`` is (fraction, good output tokens/s) (None: no SLO set).
    """
    problems = ["energy window too short"] if valid is False else []
    result = ok_result(tok_s=tok_s, j_tok=j_tok, energy=energy, valid=valid, problems=problems)
    result["schema_version"] = 5
    lat = result["latency"]
    lat["ttft_ms"]["p90"] = ttft_p90
    lat["ttft_origin"] = "batch start" if kind == "offline" else "actual send"
    lat["tpot_ms"] = {"p50": tpot_p90 * 0.8, "p90": tpot_p90, "p99": tpot_p90 * 1.3}
    lat["e2e_ms"] = {"p50": 600.0, "p90": 700.0, "p99": 800.0}
    result["traffic"] = {
        "kind": kind,
        "rate_per_s": rate,
        "burstiness": None,
        "n_requests": 32,
        "max_concurrency": None,
        "seed": 0,
        "pacing_lateness_ms": None,
    }
    result["concurrency"] = {
        "knob": "vllm.max_num_seqs",
        "knob_value": 256,
        "mean": concurrency,
        "max": int(concurrency * 2),
        "steady_state_mean": None if steady is None else steady["conc"],
        "running_mean": concurrency,
        "running_max": int(concurrency * 2),
        "steady_state_running_mean": None if steady is None else steady["conc"],
    }
    reasons = result["null_reasons"]
    if steady is None:
        result["steady_state"] = None
        reasons["steady_state"] = "the steady state is shorter than 20 s"
    else:
        window_s = 30.0
        sj = steady["j_tok"] if energy else None
        tokens = int(steady["tok_s"] * window_s)
        result["steady_state"] = {
            "rule": "mlenergy_v3" if kind in ("offline", "concurrency") else "open_loop",
            "start_s": 2.0,
            "end_s": 2.0 + window_s,
            "window_s": window_s,
            "requests": 20,
            "output_tokens": tokens,
            "output_tokens_per_s": steady["tok_s"],
            "mean_concurrency": steady["conc"],
            "mean_running": steady["conc"],
            "energy_j": None if sj is None else sj * tokens,
            "j_per_output_token": sj,
            "avg_power_w": None if sj is None else sj * steady["tok_s"],
            "energy_j_uncertainty": None if sj is None else 0.01 * sj * tokens,
            "j_per_output_token_uncertainty": None if sj is None else 0.01 * sj,
            "avg_power_w_uncertainty": None if sj is None else 0.01 * sj * steady["tok_s"],
        }
        if sj is None:
            for key in ("energy_j", "j_per_output_token", "avg_power_w"):
                reasons[f"steady_state.{key}"] = "no NVIDIA GPU (device is cpu)"
    if goodput is None:
        result["goodput"] = None
        reasons["goodput"] = "no SLO is set"
    else:
        fraction, good_tok_s = goodput
        result["goodput"] = {
            "slo_ttft_ms": 500.0,
            "slo_tpot_ms": 50.0,
            "slo_e2e_ms": None,
            "requests_met": round(32 * fraction),
            "fraction": fraction,
            "requests_per_s": good_tok_s / 64,
            "output_tokens_per_s": good_tok_s,
            "j_per_output_token": None if j_tok is None else j_tok * tok_s / good_tok_s,
        }
    return result


def write_rate_sweep(sweep_dir: Path, steady: bool | Callable[[dict], bool] = True) -> list[Path]:
    """traffic.rate_per_s 1,2,4,8 × 2 repeats of Poisson traffic with SLOs, all with energy:
    throughput saturates at ~400 tok/s while TTFT and TPOT climb; goodput drops at the top."""

    def make(point: dict[str, Any]) -> dict[str, Any]:
        rate = point["traffic.rate_per_s"]
        jitter = 1.0 + _NOISE[point["repeat"] % 3]
        tok = min(64.0 * rate, 400.0) * jitter
        has = steady(point) if callable(steady) else steady
        return serving_result(
            tok_s=round(tok * 0.95, 2),
            j_tok=round(2.0 / rate**0.5, 4),
            rate=rate,
            concurrency=rate * 1.5,
            steady={"tok_s": round(tok, 2), "j_tok": round(1.8 / rate**0.5, 4), "conc": rate * 2}
            if has
            else None,
            goodput=(1.0 if rate < 8 else 0.5, round(tok * (1.0 if rate < 8 else 0.5), 2)),
            ttft_p90=40.0 * rate,
            tpot_p90=10.0 + 5.0 * rate,
        )

    return write_sweep(sweep_dir, {"traffic.rate_per_s": [1, 2, 4, 8]}, make, repeats=2)


def prepared_plots(sweep: Path) -> tuple[dict[str, Any], list[str]]:
    """The report's plots over ``sweep``, prepared (not drawn), by file name; and the skip lines."""
    from llem.report.load import load_runs
    from llem.report.plots import prepare_all
    from llem.report.stats import summary_frame

    runs = load_runs([sweep])
    plots = prepare_all(runs, summary_frame(runs))
    return dict(plots.plots), list(plots.skipped)
