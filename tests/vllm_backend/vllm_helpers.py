"""Helpers for the vLLM backend tests: a tiny model vLLM's CPU attention accepts, and the real
``python -m llem`` in a subprocess."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from llem.testing.cli import run_llem as run_llem
from llem.testing.tinymodel import HEAD64, build_tiny_model

# Engine settings that keep a tiny engine cheap on a small CPU machine: no torch.compile, and a
# 64 MiB KV cache (which also skips vLLM's memory-profiling warm-up).
SMALL_ENGINE = ["vllm.enforce_eager=true", f"vllm.kv_cache_memory_bytes={64 * 2**20}"]


def build_tiny_model_head64(directory: Path) -> Path:
    """The tests' tiny tokenizer with a 2-layer random Llama of head size 64 (vLLM's CPU
    attention rejects the usual tiny model's head size of 8)."""
    return build_tiny_model(directory, **HEAD64)


def read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def output(proc: subprocess.CompletedProcess) -> str:
    return f"--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"
