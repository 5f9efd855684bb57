"""transformers' continuous-batching manager for ``pytorch.batching=continuous``: how the
``pytorch:`` and ``decoder:`` sections size and configure it, and its start, reuse and stop.

transformers (5.x) ships a continuous-batching engine: ``model.init_continuous_batching()``
returns a ``ContinuousBatchingManager`` whose background thread schedules requests step by step
over a paged KV cache (``add_request``, streamed ``GenerationOutput``s, ``start``/``stop``).
Serving a workload through it is ``llem.backends.pytorch.continuous``.

How the ``pytorch:`` and ``decoder:`` sections map onto it:

- ``pytorch.batch_size`` -> ``ContinuousBatchingConfig.max_requests_per_batch``: the requests one
  step works on, at most (decoding requests go first, so it bounds the running batch, like vLLM's
  ``max_num_seqs``).
- the KV cache (``num_blocks``) and the tokens per step (``max_batch_tokens``) are sized from the
  run's prompts: room for ``batch_size`` requests of the longest prompt plus ``max_new_tokens``
  (left to itself, transformers sizes the cache from free memory: 60% of the host's RAM on a CPU).
- decoding: the same ``generate()`` keyword arguments as the static path (``build_generate_kwargs``)
  laid over the model's generation config. What continuous batching cannot honour (beams, prompt
  lookup, no-repeat n-grams, min_new_tokens, repetition penalty, a disabled or other KV cache,
  llem's torch.compile wrapper) is a configuration error (``continuous_batching_problems``).
- prefix sharing of KV blocks is off: the static path has no prefix cache, and the manager does
  not say how many prompt tokens a request took from it.

The manager starts (cache allocation, its own warm-up) before the measured window, and keeps
running between runs that reuse the model with the same settings; ``stop`` ends it. Its batch
processor is wrapped as it starts, to record its steps (``llem.backends.pytorch.cb_steps``).
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from llem.backends.pytorch.cb_steps import StepRecorder
from llem.backends.pytorch.compile import TorchModel
from llem.backends.pytorch.kwargs import Sections, build_generate_kwargs
from llem.backends.tokens import token_lists
from llem.config.batching import continuous_batching_problems
from llem.errors import ConfigError
from llem.vocabulary.model import LoadedModel
from llem.vocabulary.workload import Prompt

log = logging.getLogger(__name__)

CONTINUOUS = "continuous"
_CB_LOGGER = "ContinuousBatchingLogger"  # transformers.generation.continuous_batching.utils
# Tokens per step when the prompts would ask for more (transformers' own default).
_MAX_BATCH_TOKENS = 8192
# The FIFO scheduler holds new prefills back when under 15% of the cache is free: leave that room.
_SAFETY_MARGIN = 0.15
_DEFAULT_BLOCK = 256


# ------------------------------------------------------------------------------------- rules
def check(sections: Sections) -> None:
    """Raise the configuration error before anything loads (the CLI's validation says the same)."""
    problems = continuous_batching_problems(sections.engine, sections.decoder, sections.speculative)
    if problems:
        raise ConfigError(problems)


# ------------------------------------------------------------------------------------ engine
@dataclass
class ContinuousEngine:
    """A started ``ContinuousBatchingManager`` and what it was started with."""

    manager: Any
    settings: str  # equal settings reuse the running manager
    startup_s: float  # init_continuous_batching + warmup + start, seconds
    max_requests_per_batch: int
    num_blocks: int
    max_batch_tokens: int
    max_prompt_tokens: int  # the longest prompt the cache was sized for
    ids: itertools.count[int] = field(default_factory=itertools.count)
    steps: StepRecorder | str = "steps not recorded"  # the recorder, or why there is none


@dataclass
class ServingModel(TorchModel):
    """A model loaded to serve (``BackendSections.serving``): its continuous-batching engine."""

    engine: ContinuousEngine | None = None


def serving_model(loaded: LoadedModel) -> ServingModel:
    """``loaded`` as a model loaded to serve; a TypeError for any other."""
    if not isinstance(loaded, ServingModel):
        raise TypeError(
            f"continuous batching was handed a {type(loaded).__name__}, not a model "
            "loaded to serve (BackendSections.serving)"
        )
    return loaded


def generation_config(sections: Sections, model: Any) -> Any:
    """The model's generation config with the static path's ``generate()`` kwargs laid over it."""
    import copy

    gen = copy.deepcopy(model.generation_config)
    gen.update(**build_generate_kwargs(sections))
    return gen


def sizing(sections: Sections, prompt_tokens: Sequence[int]) -> dict[str, int]:
    """max_requests_per_batch, num_blocks and max_batch_tokens for these prompt lengths."""
    requests = sections.engine.batch_size
    longest = max(prompt_tokens, default=1)
    per_request = math.ceil((longest + sections.decoder.max_new_tokens) / _DEFAULT_BLOCK)
    return {
        "max_requests_per_batch": requests,
        "num_blocks": math.ceil(requests * per_request / (1 - _SAFETY_MARGIN)) + 1,
        "max_batch_tokens": max(requests, min(_MAX_BATCH_TOKENS, requests * longest)),
    }


def one_at_a_time(size: dict[str, int]) -> str | None:
    """The warning for a manager sized to one request at a time (pytorch.batch_size=1, the
    default): requests then queue behind each other and nothing is batched."""
    if size["max_requests_per_batch"] != 1:
        return None
    return (
        "pytorch.batch_size=1: continuous batching holds one request at a time, so requests "
        "queue behind each other and nothing is batched; set pytorch.batch_size to the requests "
        "one step may hold (e.g. pytorch.batch_size=16)"
    )


def _cb_config(sections: Sections, size: dict[str, int]) -> Any:
    from dataclasses import fields

    from transformers.generation.configuration_utils import ContinuousBatchingConfig

    names = {f.name for f in fields(ContinuousBatchingConfig)}
    # seed: the manager seeds torch itself (a random seed when given none)
    kwargs: dict[str, Any] = {**size, "allow_block_sharing": False, "seed": sections.run_seed}
    if "auto_switch_to_flash" in names:  # transformers >= 5.2x: keep pytorch.attn_implementation
        kwargs["auto_switch_to_flash"] = False
    return ContinuousBatchingConfig(**kwargs)


def start(sections: Sections, loaded: LoadedModel, prompts: Sequence[Prompt]) -> ContinuousEngine:
    """The running engine for these settings and prompts: the one already running if it fits,
    else a new one (the old one stopped). Its start-up time is ``engine.startup_s``."""
    model = serving_model(loaded)
    lengths = [len(t) for t in token_lists(model.tokenizer, prompts)]
    size = sizing(sections, lengths)
    if warning := one_at_a_time(size):
        log.warning("%s", warning)
    gen = generation_config(sections, model.model)
    settings = json.dumps(
        [size, gen.to_json_string(), sections.run_seed], sort_keys=True, default=str
    )
    old = model.engine
    if old is not None and old.settings == settings and old.manager.is_running():
        return old
    stop(model)
    t0 = time.perf_counter()
    # transformers' continuous batching prints its own INFO lines straight to the console (its
    # logger does not propagate); llem's log says what matters (start-up, sizes)
    logging.getLogger(_CB_LOGGER).setLevel(logging.WARNING)
    manager = model.model.init_continuous_batching(
        generation_config=gen, continuous_batching_config=_cb_config(sections, size)
    )
    manager.warmup()
    steps = StepRecorder.attach(manager)
    _start_as_daemon(manager)
    startup = time.perf_counter() - t0
    log.info("continuous batching started in %.3f s (%s)", startup, size)
    model.engine = ContinuousEngine(
        manager,
        settings,
        startup,
        max_requests_per_batch=size["max_requests_per_batch"],
        num_blocks=size["num_blocks"],
        max_batch_tokens=size["max_batch_tokens"],
        max_prompt_tokens=max(lengths, default=1),
        steps=steps,
    )
    model.prefix_caching = False
    return model.engine


def _start_as_daemon(manager: Any) -> None:
    """``manager.start()`` from a daemon thread, so that its generation thread (which inherits
    the flag) cannot keep the process alive when a caller never unloads the model."""
    import threading

    starter = threading.Thread(target=manager.start, name="llem-cb-start", daemon=True)
    starter.start()
    starter.join()


def stop(loaded: LoadedModel | None) -> None:
    """Stop the manager's thread (pending requests finish first) and drop it."""
    if not isinstance(loaded, ServingModel) or loaded.engine is None:
        return
    engine, loaded.engine = loaded.engine, None
    if engine.manager.is_running():
        engine.manager.stop(block=True, timeout=60)
