"""The typed configuration tree: the root, ``ExperimentConfig``.

Each group's section lives in its own module (``llem/config/<group>.py``, re-exported here);
values live in ``llem/conf/**.yaml``. Every optional knob defaults to ``None``, which means "use
the library's own default": a ``None`` knob is never passed on to transformers. Closed choices are
``Enum`` fields so that Hydra/OmegaConf reject unknown values with the list of allowed ones. Every
field is declared with ``knob()`` or ``section()`` (``llem/config/knobs.py``): its one-line doc,
where its value goes, and its range, which ``validate.py`` checks and
``python -m llem.config.reference`` documents.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from llem.config.dataset import ChatTemplate, DatasetConfig, DatasetSource
from llem.config.decoder import DecoderConfig
from llem.config.footprint import (
    CarbonConfig,
    ChassisConfig,
    ChassisSource,
    CostConfig,
    FacilityConfig,
)
from llem.config.gpu import GPUConfig
from llem.config.knobs import FROM_PRETRAINED, LLEM, knob, section
from llem.config.measurement import BoundaryKind, EnergySource, MeasurementConfig
from llem.config.model import Dtype, ModelConfig
from llem.config.pytorch import AttnImplementation, Batching, CacheImplementation, PyTorchConfig
from llem.config.quantization import QuantizationConfig, QuantType
from llem.config.server import ServerConfig
from llem.config.slo import SloConfig
from llem.config.speculative import SpeculativeConfig, SpeculativeMethod
from llem.config.sweep import SweepConfig, SweepOrder
from llem.config.tracking import TrackerKind, TrackingConfig
from llem.config.traffic import TrafficConfig, TrafficKind
from llem.config.vllm import VLLMConfig

__all__ = [
    "AttnImplementation",
    "Batching",
    "CacheImplementation",
    "ChatTemplate",
    "DatasetConfig",
    "DatasetSource",
    "DecoderConfig",
    "Device",
    "Dtype",
    "BoundaryKind",
    "CarbonConfig",
    "ChassisConfig",
    "ChassisSource",
    "CostConfig",
    "FacilityConfig",
    "EnergySource",
    "ExperimentConfig",
    "GPUConfig",
    "MeasurementConfig",
    "ModelConfig",
    "PyTorchConfig",
    "QuantType",
    "QuantizationConfig",
    "ServerConfig",
    "SloConfig",
    "SpeculativeConfig",
    "SpeculativeMethod",
    "SweepConfig",
    "SweepOrder",
    "TrackerKind",
    "TrackingConfig",
    "TrafficConfig",
    "TrafficKind",
    "VLLMConfig",
]


class Device(Enum):
    auto = "auto"
    cuda = "cuda"
    cpu = "cpu"


@dataclass
class ExperimentConfig:
    model: ModelConfig = section(ModelConfig, doc="Which checkpoint to load, and how.")
    backend: str | None = knob(
        None,
        doc="Inference backend, set by `+backend=<name>`; null picks the default and records it.",
        goes_to=LLEM,
    )
    pytorch: PyTorchConfig = section(
        PyTorchConfig, doc="The PyTorch (transformers) backend: batching, placement, kernels."
    )
    vllm: VLLMConfig = section(
        VLLMConfig, doc="The vLLM backend (`+backend=vllm`): engine arguments, batching."
    )
    server: ServerConfig = section(
        ServerConfig,
        doc="An OpenAI-compatible server (`+backend=server`): a running one, or one llem starts.",
    )
    decoder: DecoderConfig = section(DecoderConfig, doc="How tokens are chosen, and how many.")
    speculative: SpeculativeConfig = section(
        SpeculativeConfig,
        doc="Speculative decoding (`speculative=none|ngram|draft`): proposed tokens verified "
        "several per target step.",
    )
    quantization: QuantizationConfig = section(
        QuantizationConfig, doc="bitsandbytes weight quantisation (needs a CUDA GPU)."
    )
    dataset: DatasetConfig = section(DatasetConfig, doc="The prompts.")
    measurement: MeasurementConfig = section(
        MeasurementConfig, doc="Energy, power and timing measurement."
    )
    traffic: TrafficConfig = section(
        TrafficConfig,
        doc="When requests are sent: all at once, open loop at a rate, or closed loop.",
    )
    slo: SloConfig = section(
        SloConfig, doc="Service-level objectives per request, for goodput (null: no SLO)."
    )
    gpu: GPUConfig = section(
        GPUConfig, doc="The GPU's power limit and locked clocks for the run (null: as they are)."
    )
    sweep: SweepConfig = section(SweepConfig, doc="How a --multirun is ordered and run.")
    chassis: ChassisConfig = section(
        ChassisConfig,
        doc="The chassis layer at the wall: the BMC's DCMI power reading, or a stated model.",
    )
    facility: FacilityConfig = section(
        FacilityConfig, doc="The facility layer: a layer times the PUE (modelled, always)."
    )
    carbon: CarbonConfig = section(
        CarbonConfig,
        doc="Grid carbon intensity (the user's number or a country's), for gCO2e per token.",
    )
    cost: CostConfig = section(
        CostConfig, doc="Energy and capacity prices (USD), for cost per million output tokens."
    )
    tracking: TrackingConfig = section(
        TrackingConfig,
        doc="An experiment tracker the runs are also logged to (`+tracking=mlflow`; not in the "
        "config hash).",
    )
    passthrough_kwargs: dict[str, Any] = knob(
        factory=dict,
        doc="Extra keyword arguments, merged last (overriding llem's own).",
        goes_to=FROM_PRETRAINED,
    )
    device: Device = knob(
        Device.auto, doc="Where to run: auto is CUDA when available, else the CPU.", goes_to=LLEM
    )
    repeat: int = knob(
        0,
        doc="Repetition index, for statistics over repeats (not in the config hash).",
        goes_to=LLEM,
        ge=0,
    )
    dry_run: bool = knob(False, doc="Validate and pre-flight only; load nothing.", goes_to=LLEM)
    seed: int = knob(0, doc="torch seed set before generation (sampling decoders).", goes_to=LLEM)
