"""torch.compile for the PyTorch backend: wrap the forward lazily, compile during warm-up, fall
back to eager on a compilation error outside the measured window (and fail inside it).

The state lives on the loaded model (``TorchModel``): ``torch_compile`` is what runs in the window
("pending", "active", "failed: <error>"; None when off), ``eager_forward`` the forward to fall
back to, ``compile_settled`` whether the window may begin (a compile error then fails the run).
Every batch shape the window will see is compiled in the warm-up (``warm_up_shapes``), and
``TorchModel.compilations`` counts Dynamo's compilations so the run can tell any left in the window.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from llem.backends.types import LoadedModel
from llem.config.pytorch import PyTorchConfig
from llem.errors import RunError, first_line

log = logging.getLogger(__name__)

COMPILE_PENDING = "pending"  # wrapped; compiles at the first forward
COMPILE_ACTIVE = "active"  # a compiled forward has run


@dataclass
class TorchModel(LoadedModel):
    """A transformers model in this process, with its torch.compile state."""

    eager_forward: Any = None
    compile_settled: bool = False

    def compilations(self) -> int | None:
        """Frames Dynamo has tried to compile in this process (a cache miss each: a first
        compilation, a recompilation, or a recompile-limit hit that falls back to eager); None
        with torch.compile off."""
        if self.torch_compile is None:
            return None
        from torch._dynamo.utils import counters

        return int(counters["frames"]["total"])


def is_compile_error(exc: BaseException) -> bool:
    """True for errors raised by torch.compile itself (Dynamo tracing, a backend, Inductor)."""
    from torch._dynamo.exc import TorchDynamoException

    try:
        from torch._inductor.exc import CppCompileError, InvalidCxxCompiler, OperatorIssue

        inductor: tuple[type, ...] = (CppCompileError, InvalidCxxCompiler, OperatorIssue)
    except ImportError:  # pragma: no cover - older torch
        inductor = ()
    return isinstance(exc, (TorchDynamoException, *inductor))


def wrap_compiled(loaded: TorchModel, config: PyTorchConfig) -> None:
    """Replace ``model.forward`` by its torch.compile wrapper (compiles lazily, at first use)."""
    import torch

    model = loaded.model
    opts = {
        k: v
        for k, v in (("mode", config.torch_compile_mode), ("backend", config.torch_compile_backend))
        if v is not None
    }
    try:
        loaded.eager_forward = model.forward
        model.forward = torch.compile(model.forward, **opts)  # type: ignore[call-overload]
        loaded.torch_compile = COMPILE_PENDING
    except Exception as exc:  # e.g. an unknown backend name: the run goes on eagerly
        log.warning("torch.compile failed, running eagerly: %s", first_line(exc))
        model.forward = loaded.eager_forward
        loaded.eager_forward = None
        loaded.torch_compile = f"failed: {type(exc).__name__}: {first_line(exc)}"


def compiled(loaded: TorchModel) -> bool:
    return loaded.torch_compile in (COMPILE_PENDING, COMPILE_ACTIVE)


def fall_back_to_eager(loaded: TorchModel, exc: BaseException) -> None:
    """After a compilation error: eager from now on, unless the window has begun (then fail)."""
    message = f"{type(exc).__name__}: {first_line(exc)}"
    if loaded.compile_settled:
        raise RunError(
            f"torch.compile failed inside the measured window (a recompilation): {message}",
            hint="raise measurement.warmup so every batch shape compiles before the window, "
            "or set pytorch.torch_compile=false",
        ) from exc
    log.warning("torch.compile failed at first use, running eagerly: %s", message)
    loaded.model.forward = loaded.eager_forward
    loaded.eager_forward = None
    loaded.torch_compile = f"failed: {message}"
