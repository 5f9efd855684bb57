"""The PyTorch backend's own pre-flight (its row's ``preflight`` in ``llem.config.engines``): the
attention kernel it is asked for, checked before a model loads."""

from __future__ import annotations

import importlib.util

from llem.backends.draft_vocabulary import draft_vocabulary_problem
from llem.backends.pytorch.kwargs import Sections
from llem.config.pytorch import AttnImplementation

_FLASH = (AttnImplementation.flash_attention_2, AttnImplementation.flash_attention_3)


def preflight_problems(s: Sections, device: str, has_cuda: bool) -> list[str]:
    """Every problem of ``pytorch.attn_implementation`` that can be seen before a load, and a
    draft of another vocabulary (``llem.backends.draft_vocabulary``)."""
    attn = s.engine.attn_implementation
    p: list[str] = []
    if (
        attn == AttnImplementation.flash_attention_2
        and importlib.util.find_spec("flash_attn") is None
    ):
        p.append("pytorch.attn_implementation=flash_attention_2 needs the flash-attn package")
    if (
        attn == AttnImplementation.flash_attention_3
        and importlib.util.find_spec("flash_attn_interface") is None
    ):
        p.append("pytorch.attn_implementation=flash_attention_3 needs the flash-attn-3 package")
    if attn in _FLASH and device != "cuda":
        p.append(f"pytorch.attn_implementation={attn.value} needs a CUDA device (device={device})")
    if (vocabulary := draft_vocabulary_problem(s)) is not None:
        p.append(vocabulary)
    return p
