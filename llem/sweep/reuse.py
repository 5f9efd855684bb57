"""Keeping a loaded model between consecutive runs of a sweep in one process.

Two runs reuse the model only when their load keys are identical: same weights, same
``from_pretrained`` kwargs (dtype, quantization, attention, device map, passthrough), same device
and compile settings. Generation-only knobs (decoder, batch size, dataset) never force a reload.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from llem.backends.base import Backend, LoadedModel

log = logging.getLogger(__name__)

_held: tuple[Backend, LoadedModel] | None = None  # (backend, model)


def acquire(
    backend: Backend, key: str, load: Callable[[], LoadedModel], reuse: bool
) -> tuple[LoadedModel, bool]:
    """The model for ``key``: the held one when it matches (and reuse is on), else a fresh load.

    A held model that does not match is freed before the new one loads, so two models never share
    the device.
    """
    global _held
    if _held is not None:
        held_backend, held = _held
        if reuse and held.load_key == key:
            return held, True
        release_all()
    return load(), False


def release(backend: Backend, loaded: LoadedModel | None, keep: bool) -> None:
    """After a run: keep the model for the next run, or free it now."""
    global _held
    if loaded is None:
        return
    if keep and loaded.model is not None:
        _held = (backend, loaded)
        return
    if _held is not None and _held[1] is loaded:
        _held = None
    backend.unload(loaded)


def release_all() -> None:
    global _held
    if _held is not None:
        backend, loaded = _held
        _held = None
        backend.unload(loaded)
