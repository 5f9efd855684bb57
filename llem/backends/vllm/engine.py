"""The vLLM backend's driver: one ``vllm.LLM`` engine, every prompt handed to it at once.

A serving run (``BackendSections.serving``) gets an ``AsyncLLM`` instead, built from the same
engine arguments, and ``serve`` hands it requests as they arrive (``llem.backends.vllm.serve``).

The engine schedules the requests itself (continuous batching, up to ``vllm.max_num_seqs`` at a
time), as it does when deployed. llem steps the engine (``LLMEngine.step``) with
``RequestOutputKind.DELTA`` outputs and timestamps each request's tokens as they reach this
process, so TTFT, ITL and request latency are per request (vLLM 0.32 fills
``RequestOutput.metrics`` only with stats logging on, which llem leaves off).

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
from llem.backends.tokens import token_lists
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
    request_sampling_kwargs,
)
from llem.backends.vllm.serve import (
    AsyncEngine,
    serve_requests,
    serving_kwargs,
    start_async_engine,
)
from llem.backends.vllm.shape import engine_shape
from llem.backends.vllm.speculation import (
    VLLMSpeculation,
    count_requests,
    count_step,
    fill_speculative,
    for_run,
)
from llem.backends.vllm.steps import (
    OfflineSteps,
    offline_clock,
    scheduled_tokens,
    watch_scheduler_stats,
)
from llem.config.measurement import MeasurementConfig
from llem.config.vllm import VLLMConfig
from llem.errors import RunError, first_line
from llem.vocabulary import BatchOutput, LoadedModel, Prompt, ScheduledRequest, ServeOutput

log = logging.getLogger(__name__)

#: Engine arguments the offline engine sets unless the user did (``vllm.engine_kwargs``): the
#: engine core's per-step statistics with the scheduler's iteration details, so that each step's
#: scheduled prompt tokens place prefill chunks (``llem.backends.vllm.chunks``). vLLM's default
#: stat loggers stay silent (they log at INFO; llem keeps vLLM at WARNING).
OFFLINE_DEFAULTS: dict[str, Any] = {
    "disable_log_stats": False,
    "enable_logging_iteration_details": True,
}


def offline_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The engine arguments with the offline engine's defaults under them."""
    return {**OFFLINE_DEFAULTS, **kwargs}


@dataclass
class EngineModel(LoadedModel):
    """A running vLLM engine, with the limits it settled on."""

    max_num_seqs: int | None = None
    max_model_len: int | None = None
    speculation: VLLMSpeculation | None = None  # this run's, counted from the window's start

    def fill_window(self, result: Any, run_dir: Path) -> None:
        """The ``speculative`` section, when the run speculated."""
        fill_speculative(self.speculation, result)


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

    def energy_device(self, device: str, measurement: MeasurementConfig) -> str:
        """``device``: the model runs in llem's own processes, on llem's device."""
        return device

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
                **{
                    k: v
                    if isinstance(v, (str, int, float, bool, dict, list)) or v is None
                    else repr(v)
                    for k, v in (
                        serving_kwargs(kwargs) if self.sections.serving else offline_kwargs(kwargs)
                    ).items()
                },
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
            shown = ", ".join(
                f"{k}={v}" for k, v in kwargs.items() if k not in ("model", "tokenizer")
            )
            raise RunError(
                f"could not start the vLLM engine for model.name_or_path="
                f"{self.sections.model.name_or_path}: {type(exc).__name__}: {first_line(exc)}",
                hint="see llem.log for vLLM's own messages; engine arguments: " + shown,
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
        loaded.speculation = for_run(self.sections)

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
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        if isinstance(loaded.model, AsyncEngine):
            raise RunError(
                "vLLM generate needs the offline engine, but this engine was loaded for serving",
                hint="serve the workload (Backend.serve), or load with serving off",
            )
        engine = loaded.model.llm_engine
        tokens = token_lists(loaded.tokenizer, prompts)
        params = [  # each with its prompt's stop strings
            SamplingParams(
                **request_sampling_kwargs(self.sections, p), output_kind=RequestOutputKind.DELTA
            )
            for p in prompts
        ]
        try:
            inputs = engine.renderer.render_cmpl([{"prompt_token_ids": t} for t in tokens])
        except Exception as exc:  # e.g. a prompt longer than the engine's max_model_len
            limit = loaded.max_model_len if isinstance(loaded, EngineModel) else None
            raise RunError(
                f"vLLM rejected the prompts: {first_line(exc)}",
                hint=f"the engine's max_model_len is {limit}; raise "
                "vllm.max_model_len or use shorter prompts (dataset.*)",
            ) from exc
        self._calls += 1
        ids = [f"llem-{self._calls}-{i}" for i in range(len(tokens))]
        start = time.perf_counter()
        log = OfflineSteps(start)
        try:
            for rid, engine_input, request_params in zip(ids, inputs, params, strict=True):
                engine.add_request(rid, engine_input, request_params)
            counted = loaded.speculation if isinstance(loaded, EngineModel) else None
            run = _step_until_done(engine, ids, log, self.sections.save_outputs, counted)
        except Exception as exc:
            engine.abort_request(ids)
            raise RunError(
                f"vLLM generation failed: {type(exc).__name__}: {first_line(exc)}"
            ) from exc
        end = time.perf_counter()
        steps, placement = log.engine_steps(_prefill(tokens, run.cached), [len(t) for t in tokens])
        return BatchOutput(
            start_s=start,
            end_s=end,
            input_tokens=[len(t) for t in tokens],
            output_tokens=[sum(c) for c in run.counts],
            step_times_s=run.steps,
            step_tokens=[1] * len(run.steps),
            request_step_times_s=run.times,
            request_step_tokens=run.counts,
            cached_input_tokens=run.cached,
            texts=run.texts,
            steps=steps,
            step_clock=f"{offline_clock()}; {placement.note}",
            shares_estimated=placement.unplaced and placement.note,
            finish_reasons=run.reasons,
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


def _prefill(tokens: list[list[int]], cached: list[int] | None) -> list[int]:
    """Prompt tokens each request computed: its prompt less its prefix-cache hits."""
    hits = cached if cached is not None else [0] * len(tokens)
    return [len(t) - c for t, c in zip(tokens, hits, strict=True)]


@dataclass
class _Stepped:
    """What stepping the engine to the end gave: per request its token arrival times and
    counts, its prefix-cache hits (None if any was not reported) and its text (None unless
    asked for); the times of the steps that produced any token."""

    times: list[list[float]]
    counts: list[list[int]]
    steps: list[float]
    cached: list[int] | None
    texts: list[str] | None
    reasons: list[str | None]  # vLLM's finish_reason ("stop": EOS or a stop string; "length")


def _step_until_done(
    engine: Any,
    ids: list[str],
    log: OfflineSteps,
    keep_text: bool = False,
    speculation: VLLMSpeculation | None = None,
) -> _Stepped:
    """Step the engine until every request is done (``RequestOutput.num_cached_tokens`` gives
    the prefix-cache hits). Each step's tokens per request and the scheduler's totals (where the
    engine reports them) go to ``log``; its speculative counters to ``speculation``."""
    index = {rid: i for i, rid in enumerate(ids)}
    times: list[list[float]] = [[] for _ in ids]
    counts: list[list[int]] = [[] for _ in ids]
    texts: list[list[str]] = [[] for _ in ids]
    cached: list[int | None] = [None for _ in ids]
    reasons: list[str | None] = [None for _ in ids]
    steps: list[float] = []
    metrics: list[Any] = [None for _ in ids]  # each request's spec_decode_metrics, at its end
    stats = watch_scheduler_stats(engine)
    while engine.has_unfinished_requests():
        outputs = engine.step()
        now = time.perf_counter()
        made = []
        for out in outputs:
            i = index[out.request_id]
            hits = getattr(out, "num_cached_tokens", None)
            if isinstance(hits, int):
                cached[i] = max(hits, cached[i] or 0)
            n = sum(len(c.token_ids) for c in out.outputs)
            if keep_text and out.outputs:
                texts[i].append(out.outputs[0].text)
            if out.outputs and out.outputs[0].finish_reason is not None:
                reasons[i] = str(out.outputs[0].finish_reason)
                metrics[i] = getattr(out.outputs[0], "spec_decode_metrics", None)
            if n:
                times[i].append(now)
                counts[i].append(n)
                made.append((i, n))
        if made:
            steps.append(now)
        scheduler = stats.pop()
        count_step(speculation, scheduler)
        log.step(now, made, scheduled_tokens(scheduler))
    count_requests(speculation, metrics, counts)
    known = [c for c in cached if c is not None]
    return _Stepped(
        times=times,
        counts=counts,
        steps=steps,
        cached=known if len(known) == len(ids) else None,
        texts=["".join(t) for t in texts] if keep_text else None,
        reasons=reasons,
    )
