"""The PyTorch engine's batching rules: which traffic static batches serve, and what
transformers' continuous batching cannot honour.

They are the PyTorch engine's own rules (its row in ``llem.config.engines``); another engine's run
never checks them (a ``pytorch.batching`` set under another backend is refused as another engine's
key, with that engine's equivalent).
"""

from __future__ import annotations

from llem.config import knobs
from llem.config.knobs import show
from llem.config.schema import (
    Batching,
    DecoderConfig,
    ExperimentConfig,
    PyTorchConfig,
    SpeculativeConfig,
    SpeculativeMethod,
    TrafficKind,
)


def _key(dotted: str) -> str:
    return knobs.key(ExperimentConfig, dotted)


BATCHING = _key("pytorch.batching")
BATCH_SIZE = _key("pytorch.batch_size")
TORCH_COMPILE = _key("pytorch.torch_compile")
USE_CACHE = _key("pytorch.use_cache")
CACHE_IMPLEMENTATION = _key("pytorch.cache_implementation")
NUM_BEAMS = _key("pytorch.num_beams")
PROMPT_LOOKUP = _key("pytorch.prompt_lookup_num_tokens")
NO_REPEAT_NGRAM = _key("pytorch.no_repeat_ngram_size")
MIN_NEW_TOKENS = _key("decoder.min_new_tokens")
REPETITION_PENALTY = _key("decoder.repetition_penalty")
SPECULATIVE = "speculative"  # the group: speculative=ngram


def pytorch_batching_problems(exp: ExperimentConfig) -> list[str]:
    """What the PyTorch engine's batching (``pytorch.batching``) cannot serve."""
    pt = exp.pytorch
    if pt.batching == Batching.static and exp.traffic.kind != TrafficKind.offline:
        return [
            f"{BATCHING}=static cannot serve traffic={show(exp.traffic.kind)}: static batches "
            f"serve offline traffic only (set {BATCHING}=continuous)"
        ]
    return [
        *continuous_batching_problems(pt, exp.decoder, exp.speculative),
        *pytorch_speculative_problems(exp),
    ]


def pytorch_speculative_problems(exp: ExperimentConfig) -> list[str]:
    """What transformers' speculative decoding (prompt lookup, assisted generation) cannot run:
    a batch of more than one prompt (``generate`` refuses it: "assisted generate is only
    supported for batch_size = 1") or beam search. Continuous batching's own refusal is
    ``continuous_batching_problems``."""
    method = exp.speculative.method
    if method == SpeculativeMethod.none:
        return []
    pt, p = exp.pytorch, []
    if pt.batch_size != 1:
        p.append(
            f"speculative={method.value} needs {BATCH_SIZE}=1 (it is {pt.batch_size}): "
            "transformers verifies proposals for one prompt at a time"
        )
    if pt.num_beams not in (None, 1):
        p.append(f"speculative={method.value} needs {NUM_BEAMS} unset or 1 (it is {pt.num_beams})")
    return p


def continuous_batching_problems(
    pt: PyTorchConfig, decoder: DecoderConfig, spec: SpeculativeConfig | None = None
) -> list[str]:
    """What ``pytorch.batching=continuous`` cannot honour, one line per key (empty when static).

    transformers' continuous batching (5.x) runs no beams or speculative decoding, always keeps
    its own paged KV cache, recompiles a compiled model at every batch shape, and drops the logits
    processors of no_repeat_ngram_size, min_new_tokens and repetition_penalty (with a warning
    only). The PyTorch backend checks the same before it loads anything.
    """
    if pt.batching != Batching.continuous:
        return []
    method = spec.method if spec is not None else SpeculativeMethod.none
    unsupported = {
        NUM_BEAMS: (pt.num_beams, pt.num_beams not in (None, 1)),
        SPECULATIVE: (method, method != SpeculativeMethod.none),
        CACHE_IMPLEMENTATION: (pt.cache_implementation, pt.cache_implementation is not None),
        NO_REPEAT_NGRAM: (pt.no_repeat_ngram_size, pt.no_repeat_ngram_size is not None),
        USE_CACHE: (pt.use_cache, pt.use_cache is False),
        TORCH_COMPILE: (pt.torch_compile, bool(pt.torch_compile)),
        MIN_NEW_TOKENS: (decoder.min_new_tokens, bool(decoder.min_new_tokens)),
        REPETITION_PENALTY: (
            decoder.repetition_penalty,
            decoder.repetition_penalty not in (None, 1.0),
        ),
    }
    return [
        f"{dotted}={show(value)} needs {BATCHING}=static "
        "(transformers' continuous batching does not support it)"
        for dotted, (value, bad) in unsupported.items()
        if bad
    ]
