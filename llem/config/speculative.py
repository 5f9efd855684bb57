"""The ``speculative:`` group: speculative decoding, in one vocabulary every engine maps to its
own mechanism.

``speculative=none`` (the default) runs plain decoding. ``speculative=ngram`` proposes tokens by
prompt lookup (the continuation of the last matching n-gram of the text so far);
``speculative=draft`` proposes them with a smaller draft model (transformers' assisted
generation). The target model verifies the proposals of one step in one forward pass and keeps
those its own decoding would have chosen. Which engine can run which method is its row's
``speculative`` (``llem.config.engines``), checked in pre-flight.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from llem.config.knobs import Destination, knob

SPECULATION = Destination(
    "speculation",
    "mapped by each engine to its own mechanism (transformers: `prompt_lookup_num_tokens`, "
    "`max_matching_ngram_size`, `assistant_model` and its `num_assistant_tokens`; vLLM: "
    "`speculative_config`, a launched vLLM server's `--speculative-config`; a launched SGLang "
    "server: `--speculative-algorithm` NGRAM or STANDALONE and its draft flags)",
)


class SpeculativeMethod(Enum):
    none = "none"
    ngram = "ngram"
    draft = "draft"


@dataclass
class SpeculativeConfig:
    method: SpeculativeMethod = knob(
        SpeculativeMethod.none,
        doc="none: plain decoding; ngram: prompt lookup proposes tokens; draft: a draft model "
        "(speculative.draft_model) proposes them. Set by `speculative=<method>`.",
        goes_to=SPECULATION,
    )
    num_tokens: int = knob(
        5,
        doc="Tokens proposed per verification step, at most (ngram: fewer where no n-gram "
        "matches; draft: always this many, the length budget allowing).",
        goes_to=SPECULATION,
        ge=1,
    )
    ngram_size: int | None = knob(
        None,
        doc="ngram only: the longest n-gram matched against the text so far (null: the "
        "engine's own default, 2 in transformers).",
        goes_to=SPECULATION,
        ge=1,
    )
    draft_model: str | None = knob(
        None,
        doc="draft only: the draft model's Hub name or local path; it must share the target's "
        "tokenizer. Loaded beside the target, in its dtype and on its device.",
        goes_to=SPECULATION,
    )


def speculative_problems(s: SpeculativeConfig) -> list[str]:
    """What does not fit the method, one line per key: knobs of another method, a draft method
    without its draft model."""
    p: list[str] = []
    if s.ngram_size is not None and s.method != SpeculativeMethod.ngram:
        p.append(
            f"speculative.ngram_size={s.ngram_size} needs speculative=ngram "
            f"(it is {s.method.value})"
        )
    if s.draft_model is not None and s.method != SpeculativeMethod.draft:
        p.append(
            f"speculative.draft_model={s.draft_model} needs speculative=draft "
            f"(it is {s.method.value})"
        )
    if s.method == SpeculativeMethod.draft and not s.draft_model:
        p.append(
            "speculative=draft needs speculative.draft_model (a Hub name or local path of a "
            "model that shares the target's tokenizer)"
        )
    return p
