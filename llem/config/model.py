"""The ``model:`` group: which checkpoint to load, and how."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from omegaconf import MISSING

from llem.config.knobs import FROM_PRETRAINED, knob


class Dtype(Enum):
    auto = "auto"
    float32 = "float32"
    float16 = "float16"
    bfloat16 = "bfloat16"


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
