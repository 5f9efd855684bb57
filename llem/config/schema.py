"""The typed configuration tree.

Schema lives here, values live in ``llem/conf/**.yaml``. Every optional knob defaults to ``None``,
which means "use the library's own default": a ``None`` knob is never passed on to transformers.
Closed choices are ``Enum`` fields so that Hydra/OmegaConf reject unknown values with the list of
allowed ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, List, Optional

from omegaconf import MISSING

from llem.config.vllm import VLLMConfig


class Device(Enum):
    auto = "auto"
    cuda = "cuda"
    cpu = "cpu"


class Dtype(Enum):
    auto = "auto"
    float32 = "float32"
    float16 = "float16"
    bfloat16 = "bfloat16"


class AttnImplementation(Enum):
    sdpa = "sdpa"
    flash_attention_2 = "flash_attention_2"
    flash_attention_3 = "flash_attention_3"
    eager = "eager"


class CacheImplementation(Enum):
    static = "static"
    offloaded_static = "offloaded_static"
    sliding_window = "sliding_window"


class QuantType(Enum):
    nf4 = "nf4"
    fp4 = "fp4"


class DatasetSource(Enum):
    builtin = "builtin"
    synthetic = "synthetic"
    jsonl = "jsonl"


class EnergySource(Enum):
    auto = "auto"
    nvml = "nvml"
    replay = "replay"
    none = "none"


class SweepOrder(Enum):
    grouped = "grouped"
    interleave = "interleave"
    shuffle = "shuffle"


@dataclass
class ModelConfig:
    # A HF hub id, a local directory, or ``pkg:<python package>`` for a model shipped inside an
    # installed Python package (resolved without importing the package).
    name_or_path: str = MISSING
    gguf_file: Optional[str] = None
    revision: Optional[str] = None
    dtype: Optional[Dtype] = None
    trust_remote_code: bool = False


@dataclass
class PyTorchConfig:
    batch_size: int = 1
    device_map: Optional[str] = None
    max_memory: Any = None  # {GPU index or "cpu": "20GiB"}; checked in validate.py
    attn_implementation: Optional[AttnImplementation] = None
    torch_compile: bool = False
    torch_compile_mode: Optional[str] = None
    torch_compile_backend: Optional[str] = None
    use_cache: Optional[bool] = None
    cache_implementation: Optional[CacheImplementation] = None
    num_beams: Optional[int] = None
    early_stopping: Optional[bool] = None
    length_penalty: Optional[float] = None
    no_repeat_ngram_size: Optional[int] = None
    prompt_lookup_num_tokens: Optional[int] = None
    num_threads: Optional[int] = None


@dataclass
class DecoderConfig:
    max_new_tokens: int = 64
    min_new_tokens: Optional[int] = None
    do_sample: bool = False
    temperature: Optional[float] = None
    top_k: Optional[int] = None
    top_p: Optional[float] = None
    min_p: Optional[float] = None
    repetition_penalty: Optional[float] = None


@dataclass
class QuantizationConfig:
    load_in_4bit: bool = False
    load_in_8bit: bool = False
    bnb_4bit_compute_dtype: Optional[Dtype] = None
    bnb_4bit_quant_type: Optional[QuantType] = None
    bnb_4bit_use_double_quant: Optional[bool] = None


@dataclass
class DatasetConfig:
    source: DatasetSource = DatasetSource.builtin
    path: Optional[str] = None
    n_prompts: int = 16
    input_tokens: Optional[int] = None
    seed: int = 0


@dataclass
class MeasurementConfig:
    warmup: int = 1  # warm-up batches run before the measured window (not measured)
    idle_baseline_s: float = 5.0  # idle power measured before the model loads (GPU only)
    sample_hz: float = 10.0  # power/temperature sampler rate
    cooldown_s: float = 0.0  # wait before the measured window (upper bound when waiting on temp)
    cooldown_temp_margin_c: Optional[float] = None  # wait until temp <= idle temp + margin
    min_window_s: float = 5.0  # repeat whole prompt passes until the window is this long
    energy: EnergySource = EnergySource.auto
    replay_trace: Optional[str] = None
    gpu_indices: Optional[List[int]] = None  # torch device indices to measure; None = all used


@dataclass
class SweepConfig:
    order: SweepOrder = SweepOrder.grouped
    seed: int = 0
    reuse_model: bool = True


@dataclass
class ExperimentConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    backend: Optional[str] = None
    pytorch: PyTorchConfig = field(default_factory=PyTorchConfig)
    vllm: VLLMConfig = field(default_factory=VLLMConfig)
    decoder: DecoderConfig = field(default_factory=DecoderConfig)
    quantization: QuantizationConfig = field(default_factory=QuantizationConfig)
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    measurement: MeasurementConfig = field(default_factory=MeasurementConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    passthrough_kwargs: Dict[str, Any] = field(default_factory=dict)
    device: Device = Device.auto
    repeat: int = 0
    dry_run: bool = False
    seed: int = 0  # torch seed set before generation (sampling decoders)
