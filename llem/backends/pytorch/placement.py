"""Which GPUs a transformers model is placed on, from ``pytorch.device_map`` and
``pytorch.max_memory``: the GPUs a pytorch run measures (``Backend.torch_device_indices``).

* unset or ``cuda``: the current device (llem loads with ``device_map="cuda"``);
* ``cuda:N`` or ``N``: GPU ``N`` alone;
* any other map (``auto``, ``balanced``, ``sequential``, ...): accelerate spreads the model over
  every visible GPU, or, when ``max_memory`` names GPUs (``{0: 20GiB, 1: 20GiB, cpu: 64GiB}``),
  over those only: a GPU it leaves out holds nothing, and measuring it would add its idle draw.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _gpu_index(key: object) -> int | None:
    """``0``, ``"0"`` or ``"cuda:0"`` -> 0; anything else (``cpu``, ``disk``) -> None."""
    if isinstance(key, bool):
        return None
    if isinstance(key, int):
        return key
    text = str(key).removeprefix("cuda:")
    return int(text) if text.isdigit() else None


def placed_indices(
    device_map: str | None, max_memory: Any, visible: int, current: int
) -> list[int]:
    """The torch CUDA indices the model goes to (``visible``: torch's device count; ``current``:
    its current device)."""
    if device_map in (None, "cuda"):
        return [current]
    alone = _gpu_index(device_map)
    if alone is not None:
        return [alone]
    keys = list(max_memory) if isinstance(max_memory, Mapping) else []
    named = sorted({i for i in map(_gpu_index, keys) if i is not None and i < visible})
    return named or list(range(visible))
