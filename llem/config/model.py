"""The ``model:`` group: which checkpoint to load, and how."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from omegaconf import MISSING

from llem.config.knobs import FROM_PRETRAINED, LLEM, knob


class Dtype(Enum):
    auto = "auto"
    float32 = "float32"
    float16 = "float16"
    bfloat16 = "bfloat16"


class Weights(Enum):
    pretrained = "pretrained"
    random = "random"


@dataclass
class ModelConfig:
    name_or_path: str = knob(
        MISSING,
        doc="The model: a HF hub id, a local directory, or `pkg:<python package>` for a model "
        "shipped inside an installed package (found without importing it).",
        goes_to=FROM_PRETRAINED,
        placeholder="<hub id or local directory>",
    )
    gguf_file: str | None = knob(
        None,
        doc="GGUF file inside the model directory; llem converts it once to a cached "
        "safetensors checkpoint and loads that.",
        goes_to=FROM_PRETRAINED,
    )
    revision: str | None = knob(
        None, doc="Hub branch, tag or commit to load.", goes_to=FROM_PRETRAINED
    )
    dtype: Dtype | None = knob(
        None, doc="Weight dtype; null keeps the checkpoint's own.", goes_to=FROM_PRETRAINED
    )
    trust_remote_code: bool = knob(
        False,
        doc="Run modelling code shipped with the checkpoint (also passed to the tokenizer).",
        goes_to=FROM_PRETRAINED,
    )
    weights: Weights = knob(
        Weights.pretrained,
        doc="pretrained loads the checkpoint's weights; random builds the architecture from a "
        "config.json (model.name_or_path=DIR) or model.architecture, with zero-mean random "
        "weights on the device (output lengths are then exactly max_new_tokens).",
        goes_to=LLEM,
    )
    architecture: str | None = knob(
        None,
        doc="A shipped architecture for model.weights=random (llama-3.1-8b, llama-3.2-1b, "
        "qwen2.5-7b, mistral-7b, smollm2-135m); model.name_or_path and model.gguf_file are "
        "then not used.",
        goes_to=LLEM,
    )
