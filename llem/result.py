"""The result.json schema (DESIGN.md) and its atomic writing.

Every figure that was not measured is ``null`` and its dotted key appears in ``null_reasons``
with the reason; no figure is ever a stand-in 0.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Optional

import llem
from llem.atomic import atomic_write_text

SCHEMA_VERSION = 1
RESULT_FILE = "result.json"


def atomic_write_json(path: Path, data: Any) -> Path:
    return atomic_write_text(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def quantization_label(load_in_4bit: bool, load_in_8bit: bool, quant_type: Optional[str]) -> str:
    if load_in_4bit:
        return f"bnb-4bit-{quant_type}" if quant_type else "bnb-4bit"
    if load_in_8bit:
        return "bnb-8bit"
    return "none"


def skeleton(
    *,
    status: str,
    config_hash: Optional[str],
    overrides: List[str],
    started_at: str,
    config: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]:
    """A result with every section present and every figure null."""
    pct = {"p50": None, "p90": None, "p99": None}
    return {
        "schema_version": SCHEMA_VERSION,
        "llem_version": llem.__version__,
        "status": status,
        "error": None,
        "config_hash": config_hash,
        "overrides": list(overrides),
        "started_at": started_at,
        "duration_s": None,
        "model": None,
        "backend": None,
        "device": None,
        "dtype": None,
        "quantization": None,
        "workload": {
            "n_prompts": None,
            "batch_size": None,
            "input_tokens": None,
            "output_tokens": None,
            "passes": None,
            "output_tokens_definition": "generated tokens up to and including the first EOS, "
            "no padding",
        },
        "latency": {
            "generate_s": None,
            "ttft_ms": dict(pct),
            "itl_ms": dict(pct),
            "request_latency_s": dict(pct),
        },
        "throughput": {
            "output_tokens_per_s": None,
            "requests_per_s": None,
            "definition": "output tokens / seconds inside generate() in the measured window",
        },
        "energy": {
            "source": "unavailable",
            "unavailable_reason": None,
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
        },
        "memory": {
            "peak_allocated_mb": None,
            "peak_reserved_mb": None,
            "peak_device_used_mb": None,
            "peak_host_rss_mb": None,
        },
        "thermal": {"max_temp_c": None, "throttled": None, "throttle_reasons": []},
        "compute": {
            "flops_estimate": None,
            "flops_formula": "2 x non-embedding parameters x (input + output tokens)",
            "decode_bandwidth_utilisation": None,
        },
        "lifecycle": {},
        "null_reasons": {},
        "config": config,
    }


def write_result(run_dir: Path, result: Dict[str, Any]) -> Path:
    return atomic_write_json(Path(run_dir) / RESULT_FILE, result)


def read_result(run_dir: Path) -> Optional[Dict[str, Any]]:
    path = Path(run_dir) / RESULT_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
