"""llem's own cache directory: ``LLEM_CACHE_DIR``, default ``~/.cache/llem``. What lives there
(converted GGUF copies, random-weight sources, idle baselines, load times, GPU crash records,
lm-eval's task index) is each its own module's; this one only says where."""

from __future__ import annotations

import os
from pathlib import Path


def llem_cache_dir() -> Path:
    """llem's cache: ``LLEM_CACHE_DIR``, default ``~/.cache/llem``."""
    return Path(os.environ.get("LLEM_CACHE_DIR", Path.home() / ".cache" / "llem"))
