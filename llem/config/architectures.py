"""Shipped architectures for ``model.weights=random``: configuration facts only, no weights.

``llem/data/architectures.json`` holds, per lowercase name, the ``config.json`` values of the
published model (hidden size, layers, heads, key/value heads, intermediate size, vocabulary, RoPE
base, tied embeddings, context length, dtype) and the name it was published under. Nothing here
imports torch or transformers, so validating a configuration stays fast.

``weights_problems`` holds the cross-field rules of ``model.weights`` and ``model.architecture``.
"""

from __future__ import annotations

import functools
import json
from dataclasses import replace
from importlib import resources
from typing import Any

from llem.config.decoder import DecoderConfig
from llem.config.model import ModelConfig, Weights

ARCHITECTURE = "model.architecture"
WEIGHTS_KEY = "model.weights"
GGUF_FILE = "model.gguf_file"


@functools.cache
def _catalogue() -> dict[str, Any]:
    text = resources.files("llem").joinpath("data/architectures.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def architecture_names() -> list[str]:
    """The shipped architectures' names (lowercase, sorted)."""
    return sorted(_catalogue())


def architecture_config(name: str) -> dict[str, Any]:
    """The ``config.json`` values of the shipped architecture ``name`` (a fresh copy)."""
    if name not in _catalogue():
        raise KeyError(f"{ARCHITECTURE}={name}: unknown ({', '.join(architecture_names())})")
    config: dict[str, Any] = json.loads(json.dumps(_catalogue()[name]["config"]))
    return config


def weights_problems(m: ModelConfig) -> list[str]:
    """Every rule of ``model.weights`` / ``model.architecture`` that the config breaks.

    With ``model.architecture`` set, ``model.name_or_path`` and ``model.gguf_file`` are not used
    (the default model group sets them; they load nothing). Without it, random weights are built
    from ``model.name_or_path``'s ``config.json``, so a GGUF file (a set of weights) is refused.
    bitsandbytes quantisation works over random weights (the PyTorch backend quantises the drawn
    values as it loads them), so ``quantization=bnb-4bit`` and ``bnb-8bit`` are allowed.
    """
    p: list[str] = []
    random = m.weights == Weights.random
    if m.architecture is not None and not random:
        p.append(
            f"{ARCHITECTURE}={m.architecture} needs {WEIGHTS_KEY}=random "
            "(a shipped architecture has no weights)"
        )
    if m.architecture is not None and m.architecture not in _catalogue():
        p.append(
            f"{ARCHITECTURE}={m.architecture}: unknown architecture "
            f"(allowed: {', '.join(architecture_names())})"
        )
    if random and m.architecture is None and m.gguf_file:
        p.append(
            f"{GGUF_FILE}={m.gguf_file} with {WEIGHTS_KEY}=random: a GGUF file is a set of weights "
            f"(set {ARCHITECTURE}=NAME, or model.name_or_path=DIR with a config.json and "
            f"{GGUF_FILE}=null)"
        )
    return p


def run_decoder(m: ModelConfig, d: DecoderConfig, continuous_pytorch: bool) -> DecoderConfig:
    """The decoder a run uses: with random weights, ``min_new_tokens`` is forced to
    ``max_new_tokens`` (random weights never aim for EOS, so every request generates exactly
    ``max_new_tokens``). transformers' continuous batching drops min_new_tokens; there the model's
    generation config holds no EOS instead (``llem.backends.random_weights``)."""
    if m.weights != Weights.random or continuous_pytorch:
        return d
    return replace(d, min_new_tokens=d.max_new_tokens)


def forced_lengths_note(max_new_tokens: int) -> str:
    """The sentence a random-weights result carries about its output lengths."""
    return (
        f"random weights: output lengths are forced to decoder.max_new_tokens={max_new_tokens} "
        "(min_new_tokens = max_new_tokens, EOS ignored), not the lengths the real model would "
        "generate"
    )


#: The warning every random-weights result, log and report carries.
RANDOM_POWER_WARNING = (
    "random weights: GPU power depends on the values multiplied (measured differences of up to "
    "~40% for GEMMs, arXiv 2409.18324), so this energy is a stand-in for the architecture's, "
    "not the model's figure"
)
