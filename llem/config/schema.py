"""The typed configuration tree.

Schema lives here, values live in ``llem/conf/**.yaml``. Every optional knob defaults to ``None``,
which means "use the library's own default": a ``None`` knob is never passed on to transformers.
Closed choices are ``Enum`` fields so that Hydra/OmegaConf reject unknown values with the list of
allowed ones. Every field is declared with ``knob()`` or ``section()`` (``llem/config/knobs.py``):
its one-line doc, where its value goes, and its range, which ``validate.py`` checks and
``python -m llem.config.reference`` documents.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from omegaconf import MISSING

from llem.config.knobs import BITSANDBYTES, FROM_PRETRAINED, GENERATE, LLEM, knob, section
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


class ChatTemplate(Enum):
    """``dataset.chat_template``. The field itself is ``bool | str`` because Hydra reads
    ``true``/``false`` on the command line as booleans, which an Enum field rejects."""

    auto = "auto"  # use the tokenizer's chat template when it has one
    true = "true"  # always (an error when the tokenizer has none)
    false = "false"  # send prompts as they are


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


@dataclass
class PyTorchConfig:
    batch_size: int = knob(
        1, doc="Prompts per generate() call (left-padded to one length).", goes_to=LLEM, ge=1
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
        doc="Prompt-lookup speculative decoding: tokens proposed per step; needs num_beams unset "
        "or 1.",
        goes_to=GENERATE,
        ge=1,
    )
    num_threads: int | None = knob(
        None, doc="CPU threads for torch (torch.set_num_threads).", goes_to=LLEM, ge=1
    )


@dataclass
class DecoderConfig:
    max_new_tokens: int = knob(
        64, doc="Tokens generated per prompt, at most.", goes_to=GENERATE, ge=1
    )
    min_new_tokens: int | None = knob(
        None,
        doc="Tokens generated per prompt, at least (EOS held back until then); <= max_new_tokens.",
        goes_to=GENERATE,
        ge=0,
    )
    do_sample: bool = knob(
        False,
        doc="Sample; false is greedy decoding, which drops temperature, top_k, top_p and min_p.",
        goes_to=GENERATE,
    )
    temperature: float | None = knob(
        None, doc="Softmax temperature (sampling only).", goes_to=GENERATE, gt=0
    )
    top_k: int | None = knob(
        None,
        doc="Sample from the k most likely tokens; 0 disables (sampling only).",
        goes_to=GENERATE,
        ge=0,
    )
    top_p: float | None = knob(
        None,
        doc="Nucleus sampling: smallest set with this total probability (sampling only).",
        goes_to=GENERATE,
        ge=0,
        le=1,
    )
    min_p: float | None = knob(
        None,
        doc="Drop tokens below min_p × the top token's probability (sampling only).",
        goes_to=GENERATE,
        ge=0,
        le=1,
    )
    repetition_penalty: float | None = knob(
        None, doc="Penalty on tokens already present (1 = none).", goes_to=GENERATE, gt=0
    )


@dataclass
class QuantizationConfig:
    load_in_4bit: bool = knob(
        False, doc="bitsandbytes 4-bit weights; exclusive with load_in_8bit.", goes_to=BITSANDBYTES
    )
    load_in_8bit: bool = knob(
        False,
        doc="bitsandbytes LLM.int8() weights; exclusive with load_in_4bit.",
        goes_to=BITSANDBYTES,
    )
    bnb_4bit_compute_dtype: Dtype | None = knob(
        None, doc="Compute dtype of 4-bit layers; needs load_in_4bit.", goes_to=BITSANDBYTES
    )
    bnb_4bit_quant_type: QuantType | None = knob(
        None, doc="4-bit data type; needs load_in_4bit.", goes_to=BITSANDBYTES
    )
    bnb_4bit_use_double_quant: bool | None = knob(
        None,
        doc="Quantise the quantisation constants too; needs load_in_4bit.",
        goes_to=BITSANDBYTES,
    )


@dataclass
class DatasetConfig:
    source: DatasetSource = knob(
        DatasetSource.builtin,
        doc="Where prompts come from: shipped prompts, seeded random tokens, or a JSONL file.",
        goes_to=LLEM,
    )
    path: str | None = knob(
        None,
        doc="JSONL file, one object with a `prompt` field per line (source=jsonl).",
        goes_to=LLEM,
        placeholder="<file.jsonl> (one JSON object per line with a 'prompt' field)",
    )
    n_prompts: int = knob(16, doc="Prompts per pass over the dataset.", goes_to=LLEM, ge=1)
    input_tokens: int | None = knob(
        None,
        doc="Tokens per synthetic prompt (required for source=synthetic).",
        goes_to=LLEM,
        ge=1,
    )
    seed: int = knob(0, doc="Seed of the synthetic prompts.", goes_to=LLEM)
    chat_template: bool | str = knob(
        "auto",
        doc="Send text prompts through the tokenizer's chat template: auto (when it has one), "
        "true (it must have one), false (raw text).",
        goes_to=LLEM,
    )


@dataclass
class MeasurementConfig:
    warmup: int = knob(
        1,
        doc="Warm-up batches run before the measured window (not measured).",
        goes_to=LLEM,
        ge=0,
    )
    idle_baseline_s: float = knob(
        5.0,
        doc="Seconds of idle power measured before the model loads (GPU only); 0 skips it.",
        goes_to=LLEM,
        ge=0,
    )
    sample_hz: float = knob(
        10.0,
        doc="Rate of the power, temperature and memory sampler.",
        goes_to=LLEM,
        gt=0,
        le=1000,
    )
    cooldown_s: float = knob(
        0.0,
        doc="Seconds to wait before the measured window (the upper bound when waiting on "
        "temperature).",
        goes_to=LLEM,
        ge=0,
    )
    cooldown_temp_margin_c: float | None = knob(
        None,
        doc="Wait until every GPU is at most this many °C above its idle temperature.",
        goes_to=LLEM,
        ge=0,
    )
    min_window_s: float = knob(
        5.0,
        doc="Repeat whole passes over the prompts until the measured window is this long.",
        goes_to=LLEM,
        ge=0,
    )
    energy: EnergySource = knob(
        EnergySource.auto,
        doc="Energy source: auto is NVML on CUDA when it works, else unavailable with a reason.",
        goes_to=LLEM,
    )
    replay_trace: str | None = knob(
        None,
        doc="CSV power trace (time_s,device,power_w) played for energy=replay.",
        goes_to=LLEM,
    )
    gpu_indices: list[int] | None = knob(
        None,
        doc="Torch device indices to measure; null measures the devices the model is on.",
        goes_to=LLEM,
        ge=0,
    )
    idle_max_age_s: float | None = knob(
        None,
        doc="Re-measure the process's idle baseline when older than this (s), after the GPU "
        "cools to within idle_temp_margin_c of its idle temperature; null: never re-measured.",
        goes_to=LLEM,
        gt=0,
    )
    idle_temp_margin_c: float = knob(
        3.0,
        doc="How close (°C) to its idle temperature a GPU must be before idle is re-measured.",
        goes_to=LLEM,
        ge=0,
    )
    min_valid_window_s: float = knob(
        5.0,
        doc="Validity: a measured window shorter than this (s) fails the window_length check.",
        goes_to=LLEM,
        ge=0,
    )
    min_sample_coverage: float = knob(
        0.9,
        doc="Validity: the fraction of the expected power samples that must exist.",
        goes_to=LLEM,
        ge=0,
        le=1,
    )
    max_temp_rise_c: float = knob(
        3.0,
        doc="Validity: a larger fitted temperature rise (°C) over the window is not steady.",
        goes_to=LLEM,
        ge=0,
    )
    idle_power_min_w: float = knob(
        2.0,
        doc="Validity: idle power per GPU below this (W) is implausible.",
        goes_to=LLEM,
        ge=0,
    )
    idle_power_max_fraction: float = knob(
        0.5,
        doc="Validity: idle power above this share of the GPU's power limit is implausible.",
        goes_to=LLEM,
        gt=0,
        le=1,
    )
    save_outputs: bool = knob(
        False,
        doc="Write generations.jsonl in the run directory (request, output tokens, text).",
        goes_to=LLEM,
    )


@dataclass
class SweepConfig:
    order: SweepOrder = knob(
        SweepOrder.grouped,
        doc="Run order of a --multirun: by loaded model, repeat rounds interleaved, or shuffled.",
        goes_to=LLEM,
    )
    seed: int = knob(0, doc="Seed of order=shuffle.", goes_to=LLEM)
    reuse_model: bool = knob(
        True,
        doc="Consecutive points with the same load settings share one loaded model.",
        goes_to=LLEM,
    )


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
    decoder: DecoderConfig = section(DecoderConfig, doc="How tokens are chosen, and how many.")
    quantization: QuantizationConfig = section(
        QuantizationConfig, doc="bitsandbytes weight quantisation (needs a CUDA GPU)."
    )
    dataset: DatasetConfig = section(DatasetConfig, doc="The prompts.")
    measurement: MeasurementConfig = section(
        MeasurementConfig, doc="Energy, power and timing measurement."
    )
    sweep: SweepConfig = section(SweepConfig, doc="How a --multirun is ordered and run.")
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
