"""The PyTorch backend: transformers ``from_pretrained`` + ``generate``.

Load kwargs are built from the config and passed straight to ``from_pretrained``; a ``None`` knob is
not passed, and ``passthrough_kwargs`` are merged last (they win). Generation kwargs likewise reach
``generate()``; greedy decoding drops the sampling knobs instead of passing them.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llem.backends.base import BatchOutput, LoadedModel
from llem.backends.batching import StepClock, count_output_tokens, left_pad
from llem.backends.memory import free_memory
from llem.backends.models import convert_gguf, resolve_name_or_path
from llem.config.schema import Dtype, ExperimentConfig
from llem.errors import OutOfMemory, RunError, first_line
from llem.prompts import Prompt, token_lists

log = logging.getLogger(__name__)

SAMPLING_KNOBS = ("temperature", "top_k", "top_p", "min_p")

__all__ = [
    "PyTorchBackend",
    "StepClock",
    "build_generate_kwargs",
    "build_load_kwargs",
    "count_output_tokens",
    "create_backend",
    "left_pad",
]


def _torch_dtype(dtype: Dtype | None) -> Any:
    if dtype is None:
        return None
    if dtype == Dtype.auto:
        return "auto"
    import torch

    return getattr(torch, dtype.value)


def _max_memory(value: dict[Any, str] | None) -> dict[Any, str] | None:
    if value is None:
        return None
    out: dict[Any, str] = {}
    for key, limit in value.items():
        k = str(key)
        out[int(k) if k.isdigit() else k] = str(limit)
    return out


def build_quantization_config(exp: ExperimentConfig) -> Any:
    q = exp.quantization
    if not (q.load_in_4bit or q.load_in_8bit):
        return None
    from transformers import BitsAndBytesConfig

    kwargs: dict[str, Any] = {"load_in_4bit": q.load_in_4bit, "load_in_8bit": q.load_in_8bit}
    if q.bnb_4bit_compute_dtype is not None:
        kwargs["bnb_4bit_compute_dtype"] = _torch_dtype(q.bnb_4bit_compute_dtype)
    if q.bnb_4bit_quant_type is not None:
        kwargs["bnb_4bit_quant_type"] = q.bnb_4bit_quant_type.value
    if q.bnb_4bit_use_double_quant is not None:
        kwargs["bnb_4bit_use_double_quant"] = q.bnb_4bit_use_double_quant
    return BitsAndBytesConfig(**kwargs)


def build_load_kwargs(exp: ExperimentConfig, device: str) -> dict[str, Any]:
    """Keyword arguments for ``AutoModelForCausalLM.from_pretrained`` (model path excluded)."""
    m, pt = exp.model, exp.pytorch
    kwargs: dict[str, Any] = {"trust_remote_code": m.trust_remote_code}
    optional = {
        "gguf_file": m.gguf_file,
        "revision": m.revision,
        "dtype": _torch_dtype(m.dtype),
        "device_map": pt.device_map,
        "max_memory": _max_memory(pt.max_memory),
        "attn_implementation": pt.attn_implementation.value if pt.attn_implementation else None,
        "quantization_config": build_quantization_config(exp),
    }
    kwargs.update({k: v for k, v in optional.items() if v is not None})
    if device == "cuda" and "device_map" not in kwargs:
        kwargs["device_map"] = "cuda"
    kwargs.update(exp.passthrough_kwargs)
    return kwargs


def build_generate_kwargs(exp: ExperimentConfig) -> dict[str, Any]:
    """Keyword arguments for ``model.generate`` (inputs, streamer and pad token excluded)."""
    d, pt = exp.decoder, exp.pytorch
    knobs: dict[str, Any] = {
        "max_new_tokens": d.max_new_tokens,
        "min_new_tokens": d.min_new_tokens,
        "do_sample": d.do_sample,
        "repetition_penalty": d.repetition_penalty,
        "use_cache": pt.use_cache,
        "cache_implementation": pt.cache_implementation.value if pt.cache_implementation else None,
        "num_beams": pt.num_beams,
        "early_stopping": pt.early_stopping,
        "length_penalty": pt.length_penalty,
        "no_repeat_ngram_size": pt.no_repeat_ngram_size,
        "prompt_lookup_num_tokens": pt.prompt_lookup_num_tokens,
    }
    if d.do_sample:
        knobs.update({k: getattr(d, k) for k in SAMPLING_KNOBS})
    return {k: v for k, v in knobs.items() if v is not None}


def _is_oom(exc: BaseException) -> bool:
    import torch

    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower()


def oom_error(exp: ExperimentConfig, where: str, exc: BaseException) -> OutOfMemory:
    fixes = [f"a smaller pytorch.batch_size (now {exp.pytorch.batch_size})"]
    if not (exp.quantization.load_in_4bit or exp.quantization.load_in_8bit):
        fixes.append("quantization=bnb-4bit or quantization=bnb-8bit")
    fixes.append("a cap such as pytorch.max_memory={0:20GiB,cpu:64GiB}")
    if where == "generate":
        fixes.append(f"fewer decoder.max_new_tokens (now {exp.decoder.max_new_tokens})")
    first = first_line(exc)
    return OutOfMemory(f"out of memory during {where}: {first}", hint="try " + "; or ".join(fixes))


def _shown(kwargs: dict[str, Any]) -> dict[str, Any]:
    """JSON-ready view of load kwargs (objects such as a BitsAndBytesConfig become their repr)."""
    return {
        k: (v if isinstance(v, (str, int, float, bool, dict, list)) or v is None else repr(v))
        for k, v in kwargs.items()
    }


COMPILE_PENDING = "pending"  # wrapped; compiles at the first forward
COMPILE_ACTIVE = "active"  # a compiled forward has run


def is_compile_error(exc: BaseException) -> bool:
    """True for errors raised by torch.compile itself (Dynamo tracing, a backend, Inductor)."""
    from torch._dynamo.exc import TorchDynamoException

    try:
        from torch._inductor.exc import CppCompileError, InvalidCxxCompiler, OperatorIssue

        inductor: tuple[type, ...] = (CppCompileError, InvalidCxxCompiler, OperatorIssue)
    except ImportError:  # pragma: no cover - older torch
        inductor = ()
    return isinstance(exc, (TorchDynamoException, *inductor))


def _wrap_compiled(model: Any, exp: ExperimentConfig, notes: dict[str, Any]) -> None:
    """Replace ``model.forward`` by its torch.compile wrapper (compiles lazily, at first use)."""
    import torch

    opts = {
        k: v
        for k, v in (
            ("mode", exp.pytorch.torch_compile_mode),
            ("backend", exp.pytorch.torch_compile_backend),
        )
        if v is not None
    }
    try:
        notes["eager_forward"] = model.forward
        model.forward = torch.compile(model.forward, **opts)  # type: ignore[call-overload]
        notes["torch_compile"] = COMPILE_PENDING
    except Exception as exc:  # e.g. an unknown backend name: the run goes on eagerly
        log.warning("torch.compile failed, running eagerly: %s", first_line(exc))
        model.forward = notes.pop("eager_forward")
        notes["torch_compile"] = f"failed: {type(exc).__name__}: {first_line(exc)}"


def _compiled(loaded: LoadedModel) -> bool:
    return loaded.notes.get("torch_compile") in (COMPILE_PENDING, COMPILE_ACTIVE)


def _fall_back_to_eager(loaded: LoadedModel, exc: BaseException) -> None:
    """After a compilation error: eager from now on, unless the window has begun (then fail)."""
    message = f"{type(exc).__name__}: {first_line(exc)}"
    if loaded.notes.get("compile_settled"):
        raise RunError(
            f"torch.compile failed inside the measured window (a recompilation): {message}",
            hint="raise measurement.warmup so every batch shape compiles before the window, "
            "or set pytorch.torch_compile=false",
        ) from exc
    log.warning("torch.compile failed at first use, running eagerly: %s", message)
    loaded.model.forward = loaded.notes.pop("eager_forward")
    loaded.notes["torch_compile"] = f"failed: {message}"


class PyTorchBackend:
    name = "pytorch"

    def batches(self, exp: ExperimentConfig, prompts: list[Prompt]) -> list[list[Prompt]]:
        """``pytorch.batch_size`` prompts per generate() call."""
        size = exp.pytorch.batch_size
        return [list(prompts[i : i + size]) for i in range(0, len(prompts), size)]

    def torch_device_indices(self, exp: ExperimentConfig) -> list[int]:
        """device_map "cuda" (llem's default): the current device; any other map (e.g. "auto")
        may spread the model over every visible GPU."""
        import torch

        if exp.pytorch.device_map in (None, "cuda"):
            return [torch.cuda.current_device()]
        return list(range(torch.cuda.device_count()))

    def load_key(self, exp: ExperimentConfig, device: str) -> str:
        """Equal keys load equal models: weights, from_pretrained kwargs, device, compile."""
        pt = exp.pytorch
        return json.dumps(
            {
                "model": exp.model.name_or_path,
                "kwargs": _shown(build_load_kwargs(exp, device)),
                "device": device,
                "compile": [pt.torch_compile, pt.torch_compile_mode, pt.torch_compile_backend],
                "num_threads": pt.num_threads,
            },
            sort_keys=True,
            default=str,
        )

    # ------------------------------------------------------------------ loading
    def load(self, exp: ExperimentConfig, device: str) -> LoadedModel:
        import torch
        import transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer

        transformers.utils.logging.disable_progress_bar()
        if exp.pytorch.num_threads:
            torch.set_num_threads(exp.pytorch.num_threads)
        kwargs = build_load_kwargs(exp, device)
        path, _ = resolve_name_or_path(exp.model.name_or_path)
        source = path
        t0 = time.perf_counter()
        gguf = kwargs.get("gguf_file")
        if gguf and exp.passthrough_kwargs.get("gguf_file") is None:
            converted = convert_gguf(Path(path), gguf, exp.model.trust_remote_code)
            kwargs.pop("gguf_file")
            source = str(converted)
        tok_kwargs = {
            k: kwargs[k] for k in ("revision", "trust_remote_code", "gguf_file") if k in kwargs
        }
        try:
            tokenizer = AutoTokenizer.from_pretrained(source, **tok_kwargs)
            model = AutoModelForCausalLM.from_pretrained(source, **kwargs)
        except Exception as exc:
            if _is_oom(exc):
                raise oom_error(exp, "model load", exc) from exc
            raise RunError(
                f"could not load model.name_or_path={exp.model.name_or_path}: "
                f"{type(exc).__name__}: {first_line(exc)}"
            ) from exc
        if device == "cpu" and "device_map" not in kwargs:
            model.to("cpu")  # type: ignore[arg-type]
        model.eval()
        tokenizer.padding_side = "left"
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        notes: dict[str, Any] = {}
        if exp.pytorch.torch_compile:
            _wrap_compiled(model, exp, notes)
        load_s = time.perf_counter() - t0

        from llem.compute import model_shape

        return LoadedModel(
            model=model,
            tokenizer=tokenizer,
            device=device,
            dtype=str(model.dtype).replace("torch.", ""),
            load_kwargs={"pretrained_model_name_or_path": source, **_shown(kwargs)},
            load_key=self.load_key(exp, device),
            load_s=load_s,
            source=source,
            shape=model_shape(model),
            notes=notes,
        )

    def warm_up(
        self, loaded: LoadedModel, exp: ExperimentConfig, batches: Sequence[Sequence[Prompt]]
    ) -> dict[str, Any]:
        """Run the warm-up batches; compile (or fall back to eager) here, never in the window.

        With ``measurement.warmup=0`` and torch.compile not yet run, one batch still runs here so
        that compilation happens outside the measured window. Returns ``{"torch_compile": ...}``:
        what will actually run in the window ("active", "failed: <error>"), None when off.
        """
        loaded.notes["compile_settled"] = False
        for i in range(exp.measurement.warmup):
            self.generate(loaded, exp, batches[i % len(batches)])
        if loaded.notes.get("torch_compile") == COMPILE_PENDING and batches:
            log.info("measurement.warmup=0: one batch runs outside the window to compile")
            self.generate(loaded, exp, batches[0])
        loaded.notes["compile_settled"] = True
        return {"torch_compile": loaded.notes.get("torch_compile")}

    # --------------------------------------------------------------- generating
    def generate(
        self, loaded: LoadedModel, exp: ExperimentConfig, prompts: Sequence[Prompt]
    ) -> BatchOutput:
        import torch
        from transformers import LogitsProcessorList

        model, tok = loaded.model, loaded.tokenizer
        tokens = token_lists(loaded.tokenizer, prompts)
        input_ids, mask = left_pad(tokens, tok.pad_token_id)
        target = model.device if hasattr(model, "device") else loaded.device
        input_ids, mask = input_ids.to(target), mask.to(target)
        gen = build_generate_kwargs(exp)
        clock = StepClock(cuda=loaded.device == "cuda")
        beams = int(gen.get("num_beams") or getattr(model.generation_config, "num_beams", 1) or 1)
        if beams > 1:
            gen["logits_processor"] = LogitsProcessorList([clock])
        else:
            gen["streamer"] = clock
        eos = model.generation_config.eos_token_id
        eos_ids = [] if eos is None else ([eos] if isinstance(eos, int) else list(eos))
        start = time.perf_counter()
        try:
            with torch.inference_mode():
                out = model.generate(
                    input_ids=input_ids, attention_mask=mask, pad_token_id=tok.pad_token_id, **gen
                )
        except Exception as exc:
            if _is_oom(exc):
                raise oom_error(exp, "generate", exc) from exc
            if _compiled(loaded) and is_compile_error(exc):
                _fall_back_to_eager(loaded, exc)
                return self.generate(loaded, exp, prompts)
            raise
        end = time.perf_counter()
        if loaded.notes.get("torch_compile") == COMPILE_PENDING:
            loaded.notes["torch_compile"] = COMPILE_ACTIVE
        sequences = out.sequences if hasattr(out, "sequences") else out
        new = sequences[:, input_ids.shape[1] :]
        counts = count_output_tokens(new, eos_ids)
        texts = None
        if exp.measurement.save_outputs:
            texts = [
                tok.decode(row[:n].tolist(), skip_special_tokens=True)
                for row, n in zip(new, counts, strict=True)
            ]
        return BatchOutput(
            start_s=start,
            end_s=end,
            input_tokens=[len(t) for t in tokens],
            output_tokens=counts,
            step_times_s=clock.times,
            step_tokens=clock.tokens,
            texts=texts,
            num_beams=beams,
        )

    def unload(self, loaded: LoadedModel | None) -> None:
        if loaded is not None:
            loaded.model = None
            loaded.tokenizer = None
        free_memory()


def create_backend() -> PyTorchBackend:
    return PyTorchBackend()
