"""The model a ``Runner`` keeps loaded between its runs (``reuse_model``).

The next run whose load key matches takes the kept model instead of loading again; any other
run frees it first, so two models never share the device. One ``KeptModel`` per ``Runner``:
two runners never share a model. A fresh load's time goes to ``llem.runner.load_times``.
"""

from __future__ import annotations

import gc

from llem.runner.load_times import record_load
from llem.vocabulary.engine import Backend
from llem.vocabulary.model import LoadedModel


class KeptModel:
    """At most one loaded model and the backend that unloads it."""

    def __init__(self) -> None:
        self._kept: tuple[Backend[object], LoadedModel] | None = None

    def acquire(
        self, backend: Backend[object], device: str, reuse: bool
    ) -> tuple[LoadedModel, bool]:
        """The model for this run and whether it was the kept one: the kept model when its load
        key matches (and ``reuse`` is on), else a fresh load (the kept one freed first)."""
        key = backend.load_key(device)
        if self._kept is not None and reuse and self._kept[1].load_key == key:
            return self._kept[1], True
        self.close()
        # What is alive now (imported modules, the config; the last model was collected by
        # close) lives as long as the process: the collector stops scanning it, so its full
        # passes during loading and generation no longer walk torch's and transformers'
        # objects (0.4 s of a 4-point sweep on the tiny model; bench/sweep_floor.py).
        gc.freeze()
        loaded = backend.load(device)
        record_load(key, loaded.load_s)  # for later sweep plans' estimates
        return loaded, False

    def release(self, backend: Backend[object], loaded: LoadedModel | None, keep: bool) -> None:
        """After a run: keep the model for the next run, or free it now."""
        if loaded is None:
            return
        if keep and loaded.model is not None:
            self._kept = (backend, loaded)
            return
        if self._kept is not None and self._kept[1] is loaded:
            self._kept = None
        backend.unload(loaded)

    def close(self) -> None:
        """Free the kept model, if any."""
        if self._kept is not None:
            backend, loaded = self._kept
            self._kept = None
            backend.unload(loaded)
