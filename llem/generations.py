"""``generations.jsonl``: what the measured window generated, one line per request.

Written when ``measurement.save_outputs=true``, so a user can see what was measured. Each line:
``{"pass": p, "request": i, "output_tokens": n, "text": "..."}`` where ``request`` is the prompt's
index in the prompt set (the same prompts run again in each pass of a long window) and ``text`` is
the decoded output up to and including its first EOS (special tokens dropped).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from llem.atomic import atomic_write_text
from llem.backends.types import BatchOutput

GENERATIONS_FILE = "generations.jsonl"


def write_generations(run_dir: Path, batches: Sequence[BatchOutput], n_prompts: int) -> Path:
    """Write every request of ``batches`` (in the order they ran) to ``run_dir``."""
    lines = []
    k = 0
    for b in batches:
        texts = b.texts if b.texts is not None else [None] * len(b.output_tokens)
        for n, text in zip(b.output_tokens, texts, strict=True):
            record = {"pass": k // n_prompts, "request": k % n_prompts, "output_tokens": n}
            lines.append(json.dumps({**record, "text": text}, ensure_ascii=False))
            k += 1
    return atomic_write_text(Path(run_dir) / GENERATIONS_FILE, "".join(f"{x}\n" for x in lines))
