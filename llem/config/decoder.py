"""The ``decoder:`` group: how tokens are chosen, and how many."""

from __future__ import annotations

from dataclasses import dataclass

from llem.config.knobs import GENERATE, knob


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
