"""Peak torch-allocator memory over every GPU a model uses (not just the current device).

With ``device_map=auto`` a model's layers, and their activations and KV cache, sit on several
GPUs; each has its own allocator statistics. MB here is 2**20 bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def reset_peak_memory(indices: Sequence[int]) -> None:
    """Start peak tracking afresh on each torch CUDA device in ``indices``."""
    import torch

    for i in indices:
        torch.cuda.synchronize(i)
        torch.cuda.reset_peak_memory_stats(i)


def peak_memory(indices: Sequence[int]) -> dict[str, Any]:
    """Peak allocated and reserved MB since the last reset: summed, and per device (``cuda:i``).

    The sum adds each device's own peak; the devices need not have peaked at the same moment, so
    it is an upper bound on the memory held at any one time.
    """
    import torch

    per_device = {
        f"cuda:{i}": {
            "peak_allocated_mb": round(torch.cuda.max_memory_allocated(i) / 2**20, 1),
            "peak_reserved_mb": round(torch.cuda.max_memory_reserved(i) / 2**20, 1),
        }
        for i in indices
    }
    return {
        "peak_allocated_mb": round(sum(d["peak_allocated_mb"] for d in per_device.values()), 1),
        "peak_reserved_mb": round(sum(d["peak_reserved_mb"] for d in per_device.values()), 1),
        "per_device": per_device,
    }


def free_memory() -> None:
    """After a model or engine is dropped: collect garbage and give cached CUDA memory back."""
    import gc

    gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:  # pragma: no cover - best effort cleanup
        pass
