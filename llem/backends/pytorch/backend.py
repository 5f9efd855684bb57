"""The PyTorch backend's driver: transformers ``from_pretrained`` + ``generate``."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llem.backends import random_weights
from llem.backends.batching import StepClock, left_pad
from llem.backends.gguf_cache import convert_gguf
from llem.backends.memory import free_memory
from llem.backends.models import resolve_name_or_path
from llem.backends.pytorch import cb_manager, continuous, speculation
from llem.backends.pytorch.compile import (
    COMPILE_ACTIVE,
    COMPILE_PENDING,
    TorchModel,
    compiled,
    fall_back_to_eager,
    is_compile_error,
    wrap_compiled,
)
from llem.backends.pytorch.kwargs import (
    Sections,
    build_generate_kwargs,
    build_load_kwargs,
    is_oom,
    oom_error,
)
from llem.backends.pytorch.placement import placed_indices
from llem.backends.pytorch.stops import count_to_stops, generate_stop_kwargs, stop_criterion
from llem.backends.shape import model_shape
from llem.backends.stops import batch_stops
from llem.backends.tokens import token_lists
from llem.config.measurement import MeasurementConfig
from llem.config.pytorch import PyTorchConfig
from llem.errors import RunError, first_line
from llem.vocabulary.model import LoadedModel, shown
from llem.vocabulary.workload import BatchOutput, Prompt, ScheduledRequest, ServeOutput

log = logging.getLogger(__name__)


class PyTorchBackend:
    """``pytorch.batch_size`` prompts per ``generate()`` call, left-padded to one length."""

    name = "pytorch"

    def __init__(self, sections: Sections) -> None:
        self.sections = sections
        self._stop_criteria: dict[tuple[str, ...], Any] = {}  # built once per set of strings

    @property
    def config(self) -> PyTorchConfig:
        return self.sections.engine

    def batches(self, prompts: Sequence[Prompt]) -> list[list[Prompt]]:
        """``pytorch.batch_size`` prompts per generate() call."""
        size = self.config.batch_size
        return [list(prompts[i : i + size]) for i in range(0, len(prompts), size)]

    def batch_size(self, loaded: LoadedModel) -> int:
        return self.config.batch_size

    def measures_named_gpus(self, measurement: MeasurementConfig) -> bool:
        """False: the model runs in llem's own processes, on llem's device."""
        return False

    def energy_refusal(self, measurement: MeasurementConfig) -> str | None:
        """None: the model runs in llem's process, on the GPUs it measures."""
        return None

    def torch_device_indices(self) -> list[int]:
        """The GPUs ``pytorch.device_map`` and ``pytorch.max_memory`` place the model on
        (``llem.backends.pytorch.placement``)."""
        import torch

        return placed_indices(
            self.config.device_map,
            self.config.max_memory,
            torch.cuda.device_count(),
            torch.cuda.current_device(),
        )

    def load_key(self, device: str) -> str:
        """Equal keys load equal models: weights, from_pretrained kwargs, device, compile, and
        whether it serves (a continuous-batching manager runs on a serving model)."""
        pt = self.config
        key = {
            "model": random_weights.identity(self.sections.model),
            "kwargs": shown(build_load_kwargs(self.sections, device)),
            "device": device,
            "compile": [pt.torch_compile, pt.torch_compile_mode, pt.torch_compile_backend],
            "num_threads": pt.num_threads,
            "draft": speculation.draft_key(self.sections.speculative),
        }
        if self.sections.serving:  # the model runs under a continuous-batching manager
            key["batching"] = cb_manager.CONTINUOUS
        return json.dumps(key, sort_keys=True, default=str)

    # ------------------------------------------------------------------ loading
    def load(self, device: str) -> TorchModel:
        import torch
        import transformers

        if self.sections.serving:
            cb_manager.check(self.sections)
        transformers.utils.logging.disable_progress_bar()
        if self.config.num_threads:  # the runner has set it already (llem.runner.threads)
            torch.set_num_threads(self.config.num_threads)
        kwargs = build_load_kwargs(self.sections, device)
        t0 = time.perf_counter()
        m = self.sections.model
        if random_weights.is_random(m):  # kwargs become what was done
            model, tokenizer, source = random_weights.load_random(m, device, kwargs)
        else:
            source = self._source(kwargs)
            model, tokenizer = self._from_pretrained(source, kwargs)
        if device == "cpu" and "device_map" not in kwargs:
            model.to("cpu")
        model.eval()
        tokenizer.padding_side = "left"
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        model_class = cb_manager.ServingModel if self.sections.serving else TorchModel
        loaded = model_class(
            model=model,
            tokenizer=tokenizer,
            device=device,
            dtype=str(model.dtype).replace("torch.", ""),
            load_kwargs={"pretrained_model_name_or_path": source, **shown(kwargs)},
            load_key=self.load_key(device),
            load_s=0.0,
            source=source,
            shape=None,
        )
        loaded.draft = speculation.load_draft(self.sections.speculative, model, tokenizer, device)
        if self.config.torch_compile:
            wrap_compiled(loaded, self.config)
        loaded.load_s = time.perf_counter() - t0
        loaded.shape = model_shape(model)
        return loaded

    def _source(self, kwargs: dict[str, Any]) -> str:
        """Where the weights load from; a GGUF file is converted once (and ``gguf_file`` is
        dropped from ``kwargs``) unless passthrough_kwargs name it themselves."""
        m = self.sections.model
        path, _ = resolve_name_or_path(m.name_or_path)
        gguf = kwargs.get("gguf_file")
        if gguf and self.sections.passthrough_kwargs.get("gguf_file") is None:
            kwargs.pop("gguf_file")
            return str(convert_gguf(Path(path), gguf, m.trust_remote_code))
        return path

    def _from_pretrained(self, source: str, kwargs: dict[str, Any]) -> tuple[Any, Any]:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tok_kwargs = {
            k: kwargs[k] for k in ("revision", "trust_remote_code", "gguf_file") if k in kwargs
        }
        try:
            tokenizer = AutoTokenizer.from_pretrained(source, **tok_kwargs)
            model = AutoModelForCausalLM.from_pretrained(source, **kwargs)
        except Exception as exc:
            if is_oom(exc):
                raise oom_error(self.sections, "model load", exc) from exc
            raise RunError(
                f"could not load model.name_or_path={self.sections.model.name_or_path}: "
                f"{type(exc).__name__}: {first_line(exc)}"
            ) from exc
        return model, tokenizer

    def warm_up(
        self, loaded: LoadedModel, batches: Sequence[Sequence[Prompt]], n_batches: int
    ) -> None:
        """Run the warm-up batches; compile (or fall back to eager) here, never in the window.

        With torch.compile on, every batch shape (rows, padded width) the window will see runs
        here once more if the warm-up batches did not cover it (the last partial batch, other
        prompt widths; with ``measurement.warmup=0`` that is every shape). Afterwards
        ``loaded.torch_compile`` says what will actually run in the window ("active",
        "failed: <error>"; None when off).
        """
        if self.sections.serving:
            continuous.warm_up(self.sections, loaded, batches, n_batches)
            return
        for batch in batches:  # the stop-string criteria are built here, not in the window
            self._stop_criterion(loaded, batch_stops(batch))
        model = _torch_model(loaded)
        model.compile_settled = False
        model.speculation = None  # the warm-up's requests are not the window's
        seen: set[tuple[int, int]] = set()
        for i in range(n_batches):
            batch = batches[i % len(batches)]
            self.generate(model, batch)
            seen.add(self._batch_shape(model, batch))
        if compiled(model):
            # Each new (rows, width) recompiles: every shape the window will see, the last
            # partial batch included, compiles here instead of inside the window.
            for batch in batches:
                shape = self._batch_shape(model, batch)
                if shape not in seen and compiled(model):
                    log.info("torch.compile: warming up batch shape %s outside the window", shape)
                    self.generate(model, batch)
                    seen.add(shape)
        model.compile_settled = True
        model.speculation = speculation.new_speculation(self.sections)

    @staticmethod
    def _batch_shape(loaded: LoadedModel, prompts: Sequence[Prompt]) -> tuple[int, int]:
        """(rows, padded width) of the input a batch becomes: what torch.compile specialises on."""
        widths = [len(t) for t in token_lists(loaded.tokenizer, prompts)]
        return len(prompts), max(widths, default=0)

    # --------------------------------------------------------------- generating
    def serve(
        self, loaded: LoadedModel, requests: Sequence[ScheduledRequest], max_concurrency: int | None
    ) -> ServeOutput:
        """Through transformers' continuous batching (``llem.backends.pytorch.continuous``)."""
        return continuous.serve(self.sections, loaded, requests, max_concurrency)

    def generate(self, loaded: LoadedModel, prompts: Sequence[Prompt]) -> BatchOutput:
        import torch

        model, tok = loaded.model, loaded.tokenizer
        tokens = token_lists(tok, prompts)
        input_ids, mask = left_pad(tokens, tok.pad_token_id)
        target = model.device if hasattr(model, "device") else loaded.device
        input_ids, mask = input_ids.to(target), mask.to(target)
        gen, clock, beams = self._generate_kwargs(loaded)
        stops = batch_stops(prompts)
        criterion = self._stop_criterion(loaded, stops)
        width = int(input_ids.shape[1])
        stopping, recorder = generate_stop_kwargs(tok, stops, criterion, width, beams)
        gen.update(stopping)
        eos = model.generation_config.eos_token_id
        eos_ids = [] if eos is None else ([eos] if isinstance(eos, int) else list(eos))
        counted = getattr(loaded, "speculation", None)
        count = speculation.RequestCount()
        start = time.perf_counter()
        try:
            with torch.inference_mode(), speculation.counting(model, count, on=counted is not None):
                out = model.generate(
                    input_ids=input_ids, attention_mask=mask, pad_token_id=tok.pad_token_id, **gen
                )
        except Exception as exc:
            if is_oom(exc):
                raise oom_error(self.sections, "generate", exc) from exc
            torch_model = _torch_model(loaded)
            if compiled(torch_model) and is_compile_error(exc):
                fall_back_to_eager(torch_model, exc)
                return self.generate(loaded, prompts)
            raise
        end = time.perf_counter()
        if counted is not None:
            counted.requests.append(count)
        if loaded.torch_compile == COMPILE_PENDING:
            loaded.torch_compile = COMPILE_ACTIVE
        sequences = out.sequences if hasattr(out, "sequences") else out
        new = sequences[:, input_ids.shape[1] :]
        counts, reasons = count_to_stops(new, eos_ids, tok, stops, recorder)
        texts = None
        if self.sections.save_outputs:
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
            finish_reasons=reasons,
        )

    def _stop_criterion(self, loaded: LoadedModel, stops: tuple[str, ...]) -> Any:
        """transformers' criterion for ``stops`` (None for none), built once per run."""
        if not stops:
            return None
        if stops not in self._stop_criteria:
            self._stop_criteria[stops] = stop_criterion(loaded.tokenizer, stops)
        return self._stop_criteria[stops]

    def _generate_kwargs(self, loaded: LoadedModel) -> tuple[dict[str, Any], StepClock, int]:
        """generate() kwargs with a step clock attached (a logits processor under beam search,
        where streamers are not allowed), and the beams per request."""
        from transformers import LogitsProcessorList

        gen = build_generate_kwargs(self.sections)
        draft = getattr(loaded, "draft", None)
        gen.update(speculation.generate_kwargs(self.sections.speculative, draft))
        clock = StepClock(cuda=loaded.device == "cuda")
        config_beams = getattr(loaded.model.generation_config, "num_beams", 1)
        beams = int(gen.get("num_beams") or config_beams or 1)
        if beams > 1:
            gen["logits_processor"] = LogitsProcessorList([clock])
        else:
            gen["streamer"] = clock
        return gen, clock, beams

    def unload(self, loaded: LoadedModel | None) -> None:
        cb_manager.stop(loaded)
        if loaded is not None:
            loaded.model = None
            loaded.tokenizer = None
        if isinstance(loaded, TorchModel):
            loaded.draft = None  # speculative=draft's model goes with the target
        free_memory()


def _torch_model(loaded: LoadedModel) -> TorchModel:
    if not isinstance(loaded, TorchModel):
        raise TypeError(f"the pytorch backend was handed a {type(loaded).__name__}")
    return loaded
