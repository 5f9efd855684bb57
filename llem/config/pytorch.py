"""The ``pytorch:`` group: the PyTorch (transformers) backend's own section."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from llem.config.knobs import FROM_PRETRAINED, GENERATE, LLEM, knob


class AttnImplementation(Enum):
    sdpa = "sdpa"
    flash_attention_2 = "flash_attention_2"
    flash_attention_3 = "flash_attention_3"
    eager = "eager"


class Batching(Enum):
    static = "static"
    continuous = "continuous"


class CacheImplementation(Enum):
    static = "static"
    offloaded_static = "offloaded_static"
    sliding_window = "sliding_window"


@dataclass
class PyTorchConfig:
    batch_size: int = knob(
        1, doc="Prompts per generate() call (left-padded to one length).", goes_to=LLEM, ge=1
    )
    batching: Batching = knob(
        Batching.static,
        doc="static: fixed batches of batch_size (offline traffic only); continuous: "
        "transformers' continuous batching, which serves every traffic kind.",
        goes_to=LLEM,
    )
    device_map: str | None = knob(
        None,
        doc="Device placement (`auto`, `cuda`, ...); null puts the whole model on `device`.",
        goes_to=FROM_PRETRAINED,
    )
    max_memory: Any = knob(
        None,
        doc="Memory cap per device, {GPU index or cpu or disk: size}, e.g. {0:20GiB,cpu:64GiB}.",
        goes_to=FROM_PRETRAINED,
    )
    attn_implementation: AttnImplementation | None = knob(
        None, doc="Attention kernel.", goes_to=FROM_PRETRAINED
    )
    torch_compile: bool = knob(
        False,
        doc="Wrap the model's forward in torch.compile (a failure warns and runs eagerly).",
        goes_to=LLEM,
    )
    torch_compile_mode: str | None = knob(
        None,
        doc="torch.compile mode (`default`, `reduce-overhead`, `max-autotune`, ...); "
        "needs torch_compile=true.",
        goes_to=LLEM,
    )
    torch_compile_backend: str | None = knob(
        None, doc="torch.compile backend (`inductor`, ...); needs torch_compile=true.", goes_to=LLEM
    )
    use_cache: bool | None = knob(None, doc="Reuse past keys and values.", goes_to=GENERATE)
    cache_implementation: CacheImplementation | None = knob(
        None, doc="KV cache class; needs use_cache true or unset.", goes_to=GENERATE
    )
    num_beams: int | None = knob(None, doc="Beam search width.", goes_to=GENERATE, ge=1)
    early_stopping: bool | None = knob(
        None, doc="Stop beam search once num_beams candidates are done.", goes_to=GENERATE
    )
    length_penalty: float | None = knob(
        None, doc="Beam score exponent on length (> 0 favours longer).", goes_to=GENERATE
    )
    no_repeat_ngram_size: int | None = knob(
        None, doc="Never repeat an n-gram of this size.", goes_to=GENERATE, ge=1
    )
    prompt_lookup_num_tokens: int | None = knob(
        None,
        doc="Moved: use `speculative=ngram speculative.num_tokens=N` (a value here is refused "
        "with that line).",
        goes_to=GENERATE,
        ge=1,
    )
    num_threads: int | None = knob(
        None,
        doc="CPU threads for torch (intra-op and, where torch still allows it, inter-op); null: "
        "the CPUs this process may use divided by the points the launcher runs at once on this "
        "host. Recorded as hardware.torch_threads.",
        goes_to=LLEM,
        ge=1,
    )
