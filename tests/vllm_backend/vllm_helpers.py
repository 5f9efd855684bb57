"""Helpers for the vLLM backend tests: a tiny model vLLM's CPU attention accepts, and the real
``python -m llem`` in a subprocess."""

from __future__ import annotations

import json
import stat
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


def serving_backend(model_dir: Path, *overrides: str) -> Any:
    """A vLLM backend built for a serving run (``BackendSections.serving``) on ``model_dir``,
    with the small-engine settings, from a composed configuration."""
    from dataclasses import replace

    from hydra import compose, initialize_config_module

    from llem.backends import sections
    from llem.backends.vllm import VLLMBackend
    from llem.config.store import register_configs
    from llem.config.validate import to_experiment

    register_configs()
    with initialize_config_module(version_base="1.3", config_module="llem.conf"):
        cfg = compose(
            config_name="config",
            overrides=[
                "+backend=vllm",
                "model=hf",
                f"model.name_or_path={model_dir}",
                *SMALL_ENGINE,
                *overrides,
            ],
        )
    return VLLMBackend(replace(sections(to_experiment(cfg)), serving=True))


def engine_processes() -> set[int]:
    """This process's descendants (a vLLM engine core and its workers), less Python's
    multiprocessing resource tracker, which lives as long as this process does."""
    import psutil

    own = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if "resource_tracker" not in " ".join(child.cmdline()):
                own.add(child.pid)
        except psutil.NoSuchProcess:
            continue
    return own


def sockets_under(root: Path) -> list[Path]:
    """The Unix socket files anywhere under ``root``."""
    return [p for p in root.rglob("*") if stat.S_ISSOCK(p.lstat().st_mode)]


def traffic_options(run_from: Path, options: dict[str, dict[str, Any]]) -> str:
    """Write each option's traffic keys to ``run_from/conf/traffic/<name>.yaml`` (llem reads
    ``conf/`` in the directory it runs from) and return the override that sweeps them in order
    (``traffic=a,b``): one ``--multirun`` gives each point its own traffic keys."""
    folder = run_from / "conf" / "traffic"
    folder.mkdir(parents=True, exist_ok=True)
    for name, keys in options.items():
        (folder / f"{name}.yaml").write_text("".join(f"{k}: {v}\n" for k, v in keys.items()))
    return "traffic=" + ",".join(options)


def sweep_results(sweep: Path, n: int) -> list[tuple[Path, dict[str, Any]]]:
    """A ``--multirun``'s ``n`` job directories (``sweep/0`` ...) in sweep order, each with its
    result.json."""
    return [(sweep / str(i), read_json(sweep / str(i) / "result.json")) for i in range(n)]
