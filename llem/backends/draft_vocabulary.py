"""Pre-flight for ``speculative=draft``: a draft whose tokenizer's vocabulary differs from the
target's is refused before anything loads, on every engine llem runs it on. vLLM verifies the
draft's token ids as the target's, and so does transformers' assisted generation unless it is
given both tokenizers (its "universal" mode, which llem does not use): a draft of another
vocabulary proposes other tokens' ids.

Only local checkpoints are compared here (a Hub name may need the network; the PyTorch engine
compares the loaded tokenizers again, ``llem.backends.pytorch.speculation.load_draft``); a
random-weights or GGUF target is left to the load.
"""

from __future__ import annotations

from typing import Any

from llem.backends import random_weights
from llem.backends.models import resolve_name_or_path
from llem.config.speculative import SpeculativeMethod


def _local_vocabulary(name: str, trust_remote_code: bool) -> dict[str, int] | None:
    """The vocabulary of the tokenizer at local path ``name`` (None: not local, or unreadable)."""
    path, local = resolve_name_or_path(name)
    if not local:
        return None
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
    except Exception:  # the load says what is wrong with it, with the engine's own message
        return None
    return dict(tokenizer.get_vocab())


def draft_vocabulary_problem(sections: Any) -> str | None:
    """The one line refusing a draft whose vocabulary differs from the target's, or None."""
    spec, m = sections.speculative, sections.model
    if spec.method != SpeculativeMethod.draft or not spec.draft_model:
        return None
    if m.gguf_file or random_weights.is_random(m):
        return None
    draft = _local_vocabulary(spec.draft_model, m.trust_remote_code)
    target = _local_vocabulary(m.name_or_path, m.trust_remote_code) if draft else None
    if draft is None or target is None or draft == target:
        return None
    return (
        f"speculative.draft_model={spec.draft_model} does not share the tokenizer of "
        f"model.name_or_path={m.name_or_path}: their vocabularies differ ({len(draft)} and "
        f"{len(target)} tokens, {len(draft.items() ^ target.items())} entries apart); "
        "use a draft of the target's family"
    )
