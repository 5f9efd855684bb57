"""The footprint CLI tests' run: a short one of the tiny model, on the CPU, with no energy source
of its own (the layers under test bring theirs)."""

from __future__ import annotations

from pathlib import Path


def tiny_run(model_dir: Path) -> tuple[str, ...]:
    """The overrides of that run."""
    return (
        "model=hf",
        f"model.name_or_path={model_dir}",
        "device=cpu",
        "measurement.energy=none",
        "measurement.warmup=0",
        "decoder.max_new_tokens=4",
        "dataset.n_prompts=2",
    )
