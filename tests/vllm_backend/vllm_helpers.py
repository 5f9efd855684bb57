"""Helpers for the vLLM backend tests: a tiny model vLLM's CPU attention accepts, and the real
``python -m llem`` in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

# Engine settings that keep a tiny engine cheap on a small CPU machine: no torch.compile, and a
# 64 MiB KV cache (which also skips vLLM's memory-profiling warm-up).
SMALL_ENGINE = ["vllm.enforce_eager=true", f"vllm.kv_cache_memory_bytes={64 * 2**20}"]


def build_tiny_model_head64(directory: Path) -> Path:
    """The tests' tiny tokenizer with a 2-layer random Llama of head size 64 (vLLM's CPU
    attention rejects the usual tiny model's head size of 8)."""
    import torch
    from tinymodel import build_tiny_model
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    build_tiny_model(directory)
    tok = AutoTokenizer.from_pretrained(directory)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=1024,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(directory)
    return directory


def llem_env() -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


def run_llem(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "llem", *args],
        cwd=REPO,
        env=llem_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def output(proc: subprocess.CompletedProcess) -> str:
    return f"--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"
