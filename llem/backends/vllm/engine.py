"""The vLLM backend's driver: one ``vllm.LLM`` engine, every prompt handed to it at once.

A serving run (``BackendSections.serving``) gets an ``AsyncLLM`` instead, built from the same
engine arguments, and ``serve`` hands it requests as they arrive (``llem.backends.vllm.serve``).

The engine schedules the requests itself (continuous batching, up to ``vllm.max_num_seqs`` at a
time), as it does when deployed; how llem steps it and times each request's tokens is
``llem.backends.vllm.offline``.

Prompts are tokenized by llem with the model's own tokenizer, exactly as the pytorch backend does,
and handed over as token ids, so both backends see the same input tokens.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llem.backends import random_weights
from llem.backends.memory import free_memory
from llem.backends.vllm.core_process import engine_process_note
from llem.backends.vllm.ipc import use_own_ipc_directory
from llem.backends.vllm.kwargs import (
    SAMPLING_SEED,
    Sections,
    build_engine_kwargs,
    build_sampling_kwargs,
    checkpoint_source,
    model_label,
    quiet_vllm_logs,
)
from llem.backends.vllm.offline import generate_offline, offline_kwargs
from llem.backends.vllm.serve import (
    AsyncEngine,
    serve_requests,
    serving_kwargs,
    start_async_engine,
)
from llem.backends.vllm.shape import engine_shape
from llem.backends.vllm.speculation import (
    VLLMSpeculation,
    new_vllm_speculation,
    speculative_facts,
)
from llem.config.measurement import MeasurementConfig
from llem.config.vllm import VLLMConfig
from llem.errors import RunError, first_line
from llem.vocabulary.facts import LentGpus, WindowFacts
from llem.vocabulary.model import LoadedModel, shown
from llem.vocabulary.workload import BatchOutput, Prompt, ScheduledRequest, ServeOutput

log = logging.getLogger(__name__)


@dataclass
class EngineModel(LoadedModel):
    """A running vLLM engine, with the limits it settled on."""

    max_num_seqs: int | None = None
    max_model_len: int | None = None
    speculation: VLLMSpeculation | None = None  # this run's, counted from the window's start

    def window_facts(self, run_dir: Path, gpus: LentGpus, measured: Sequence[str]) -> WindowFacts:
        """The ``speculative`` section as counted, when the run speculated."""
        return WindowFacts(speculative=speculative_facts(self.speculation))


class VLLMBackend:
    """All prompts at once; the engine schedules up to ``vllm.max_num_seqs`` at a time."""

    name = "vllm"

    def __init__(self, sections: Sections) -> None:
        self.sections = sections
        self._calls = 0

    @property
    def config(self) -> VLLMConfig:
        return self.sections.engine

    def load_key(self, device: str) -> str:
        """Equal keys build equal engines: model and every engine argument (decoder and dataset
        changes keep the engine)."""
        kwargs = build_engine_kwargs(self.sections, device, model_label(self.sections))
        key: dict[str, Any] = {"engine": offline_kwargs(kwargs), "device": device}
        if self.sections.serving:  # another engine object (AsyncLLM) with other defaults
            key["serving"] = serving_kwargs(kwargs)
        return json.dumps(key, sort_keys=True, default=str)

    def batches(self, prompts: Sequence[Prompt]) -> list[list[Prompt]]:
        """All prompts at once: the engine schedules up to vllm.max_num_seqs at a time."""
        return [list(prompts)]

    def batch_size(self, loaded: LoadedModel) -> int:
        """The engine's own limit on sequences in flight (``max_num_seqs`` as it settled it)."""
        limit = loaded.max_num_seqs if isinstance(loaded, EngineModel) else None
        return int(limit or self.config.max_num_seqs or 1)

    def measures_named_gpus(self, measurement: MeasurementConfig) -> bool:
        """False: the engine runs in llem's own processes, on llem's device."""
        return False

    def energy_refusal(self, measurement: MeasurementConfig) -> str | None:
        """None: the engine runs in llem's processes, on the GPUs it measures."""
        return None

    def torch_device_indices(self) -> list[int]:
        """The GPUs vLLM uses: the first tensor x pipeline parallel visible devices."""
        v = self.config
        return list(range((v.tensor_parallel_size or 1) * (v.pipeline_parallel_size or 1)))

    # ------------------------------------------------------------------ loading
    def load(self, device: str) -> EngineModel:
        quiet_vllm_logs()
        use_own_ipc_directory()
        t0 = time.perf_counter()
        source = checkpoint_source(self.sections)
        kwargs = build_engine_kwargs(self.sections, device, source)
        llm, tokenizer = self._start(source, kwargs)
        load_s = time.perf_counter() - t0
        config = llm.vllm_config if isinstance(llm, AsyncEngine) else llm.llm_engine.vllm_config
        return EngineModel(
            model=llm,
            tokenizer=tokenizer,
            device=device,
            dtype=str(config.model_config.dtype).replace("torch.", ""),
            load_kwargs={
                **shown(
                    serving_kwargs(kwargs) if self.sections.serving else offline_kwargs(kwargs)
                ),
                **random_weights.described(self.sections.model),
                "llem_sampling_seed": SAMPLING_SEED.format(seed=kwargs["seed"]),
            },
            load_key=self.load_key(device),
            load_s=load_s,
            source=source,
            shape=engine_shape(source, config.model_config),
            engine_process=engine_process_note(self.sections.serving),
            max_num_seqs=config.scheduler_config.max_num_seqs,
            max_model_len=config.model_config.max_model_len,
            prefix_caching=bool(config.cache_config.enable_prefix_caching),
        )

    def _start(self, source: str, kwargs: dict[str, Any]) -> tuple[Any, Any]:
        """The tokenizer and a started engine: ``vllm.LLM``, or for a serving run an
        ``AsyncEngine`` (a failure names the engine arguments)."""
        from transformers import AutoTokenizer
        from vllm import LLM

        revision = {"revision": kwargs["revision"]} if "revision" in kwargs else {}
        try:
            tokenizer = AutoTokenizer.from_pretrained(
                source, trust_remote_code=self.sections.model.trust_remote_code, **revision
            )
            if self.sections.serving:
                return start_async_engine(kwargs), tokenizer
            return LLM(**offline_kwargs(kwargs)), tokenizer
        except Exception as exc:
            args = ", ".join(
                f"{k}={v}" for k, v in kwargs.items() if k not in ("model", "tokenizer")
            )
            raise RunError(
                f"could not start the vLLM engine for model.name_or_path="
                f"{self.sections.model.name_or_path}: {type(exc).__name__}: {first_line(exc)}",
                hint="see llem.log for vLLM's own messages; engine arguments: " + args,
            ) from exc

    def warm_up(
        self, loaded: LoadedModel, batches: Sequence[Sequence[Prompt]], n_batches: int
    ) -> None:
        """``n_batches`` batches, outside the window (vLLM compiles while it loads); a serving
        engine serves each batch's prompts, all at once. Speculation is counted from its end."""
        assert isinstance(loaded, EngineModel)
        loaded.speculation = None  # the warm-up's requests are not the window's
        for i in range(n_batches if batches else 0):
            batch = batches[i % len(batches)]
            if isinstance(loaded.model, AsyncEngine):
                offline = [ScheduledRequest(k, k, p, 0.0) for k, p in enumerate(batch)]
                self.serve(loaded, offline, None)
            else:
                self.generate(loaded, batch)
        loaded.speculation = new_vllm_speculation(self.sections)

    # --------------------------------------------------------------- generating
    def serve(
        self, loaded: LoadedModel, requests: Sequence[ScheduledRequest], max_concurrency: int | None
    ) -> ServeOutput:
        """Serve a workload through the ``AsyncLLM`` a serving run loads (one task per request,
        paced by ``llem.backends.traffic.drive``); streamed chunks and engine steps are
        timestamped on ``time.perf_counter`` in this process."""
        engine = loaded.model
        if not isinstance(engine, AsyncEngine):
            raise RunError(
                "vLLM serve needs the asynchronous engine, but this engine was loaded for "
                "offline batches",
                hint="load with BackendSections.serving=True (a run with a traffic workload)",
            )
        return serve_requests(
            engine,
            loaded.tokenizer,
            requests,
            max_concurrency,
            build_sampling_kwargs(self.sections),
            save_outputs=self.sections.save_outputs,
            speculation=loaded.speculation if isinstance(loaded, EngineModel) else None,
        )

    def generate(self, loaded: LoadedModel, prompts: Sequence[Prompt]) -> BatchOutput:
        """Every prompt at once through the offline engine (``llem.backends.vllm.offline``)."""
        if isinstance(loaded.model, AsyncEngine):
            raise RunError(
                "vLLM generate needs the offline engine, but this engine was loaded for serving",
                hint="serve the workload (Backend.serve), or load with serving off",
            )
        self._calls += 1
        own = loaded if isinstance(loaded, EngineModel) else None
        return generate_offline(
            loaded.model,
            loaded.tokenizer,
            prompts,
            self.sections,
            f"llem-{self._calls}",
            max_model_len=None if own is None else own.max_model_len,
            speculation=None if own is None else own.speculation,
        )

    def unload(self, loaded: LoadedModel | None) -> None:
        """Shut the engine's processes down and free its memory before another engine starts."""
        if loaded is not None and loaded.model is not None:
            llm = loaded.model
            loaded.model = None
            loaded.tokenizer = None
            try:
                if isinstance(llm, AsyncEngine):
                    llm.shutdown()
                else:
                    llm.llm_engine.engine_core.shutdown()
            except Exception as exc:  # pragma: no cover - best effort cleanup
                log.warning("vLLM engine shutdown: %s", first_line(exc))
            del llm
        free_memory()
