"""torch.compile for the PyTorch backend: wrap the forward lazily, compile during warm-up, fall
back to eager on a compilation error outside the measured window (and fail inside it).

The state lives on the loaded model (``TorchModel``): ``torch_compile`` is what runs in the window
("pending", "active", "failed: <error>"; None when off), ``eager_forward`` the forward to fall
back to, ``compile_settled`` whether the window may begin (a compile error then fails the run).
Every batch shape the window will see is compiled in the warm-up (``warm_up_shapes``), and
``TorchModel.compilations`` counts Dynamo's compilations so the run can tell any left in the window.

Dynamo's silent fallback is counted too: once a frame reaches
``torch._dynamo.config.recompile_limit`` (8), Dynamo warns once and stops compiling it; every later
input its compiled graphs do not fit runs eagerly, with no compilation and no counter moved. So the
backend torch.compile would use is wrapped to count each run of a compiled graph, and
``model.forward`` to count its calls: a forward call in which no compiled graph ran ran eagerly
(``TorchModel.forward_calls``). A call that ran some of its graphs and fell back in a nested frame
counts as compiled.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llem.backends.pytorch.speculation import Speculation
from llem.config.pytorch import PyTorchConfig
from llem.errors import RunError, first_line
from llem.vocabulary.facts import LentGpus, WindowFacts
from llem.vocabulary.model import LoadedModel

log = logging.getLogger(__name__)

COMPILE_PENDING = "pending"  # wrapped; compiles at the first forward
COMPILE_ACTIVE = "active"  # a compiled forward has run


@dataclass
class TorchModel(LoadedModel):
    """A transformers model in this process, with its torch.compile state."""

    eager_forward: Any = None
    compile_settled: bool = False
    calls: CallCounts = field(default_factory=lambda: CallCounts())
    draft: Any = None  # speculative=draft: the draft model, loaded with the target
    speculation: Speculation | None = None  # this run's, counted from the window's start

    def window_facts(self, run_dir: Path, gpus: LentGpus, measured: Sequence[str]) -> WindowFacts:
        """The ``speculative`` section as counted and when its drafts ran, when the run
        speculated."""
        if self.speculation is None:
            return WindowFacts()
        return WindowFacts(
            speculative=self.speculation.facts(), draft_spans=self.speculation.spans()
        )

    def compilations(self) -> int | None:
        """Frames Dynamo has tried to compile in this process (a cache miss each: a first
        compilation, a recompilation, or a recompile-limit hit that falls back to eager); None
        with torch.compile off."""
        if self.torch_compile is None:
            return None
        from torch._dynamo.utils import counters

        return int(counters["frames"]["total"])

    def forward_calls(self) -> tuple[int, int] | None:
        """(forward calls through the compiled wrapper, those in which no compiled graph ran) so
        far; None with torch.compile off or where its graph runs could not be counted."""
        if self.torch_compile is None or not self.calls.counted:
            return None
        return self.calls.forward, self.calls.eager


@dataclass
class CallCounts:
    """Running counts: forward calls, those that ran eagerly, and runs of compiled graphs."""

    forward: int = 0
    eager: int = 0
    graphs: int = 0
    counted: bool = True  # False: torch.compile's own backend ran uncounted (see wrap_compiled)


class CountingBackend:
    """A torch.compile backend: ``inner`` (what torch.compile would build from the backend name
    and mode), with every run of a graph it compiled counted in ``counts.graphs``."""

    def __init__(self, inner: Callable[..., Any], counts: CallCounts) -> None:
        self.inner, self.counts = inner, counts
        self.__name__ = f"counted_{getattr(inner, 'compiler_name', 'backend')}"

    def __call__(self, gm: Any, example_inputs: Any) -> Any:
        compiled_fn = self.inner(gm, example_inputs)
        counts = self.counts

        @functools.wraps(compiled_fn)  # keeps Inductor's _boxed_call and the like
        def run(*args: Any) -> Any:
            counts.graphs += 1
            return compiled_fn(*args)

        return run

    def reset(self) -> None:
        if hasattr(self.inner, "reset"):
            self.inner.reset()


def _inner_backend(config: PyTorchConfig) -> Callable[..., Any]:
    """The backend object ``torch.compile(backend=..., mode=...)`` builds from the config."""
    import torch

    name = config.torch_compile_backend or "inductor"
    if name == "inductor":
        return torch._TorchCompileInductorWrapper(config.torch_compile_mode, None, None)
    return torch._TorchCompileWrapper(name, config.torch_compile_mode, None, None)


def _counted(forward: Callable[..., Any], counts: CallCounts) -> Callable[..., Any]:
    """``forward``, counting its calls and those in which no compiled graph ran (eager)."""

    @functools.wraps(forward)
    def run(*args: Any, **kwargs: Any) -> Any:
        graphs = counts.graphs
        out = forward(*args, **kwargs)
        counts.forward += 1
        counts.eager += counts.graphs == graphs
        return out

    return run


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
    try:
        loaded.eager_forward = model.forward
        try:
            backend = CountingBackend(_inner_backend(config), loaded.calls)
        except (AttributeError, TypeError) as exc:  # torch's backend wrappers are private
            log.warning("eager fallbacks will not be counted: %s", first_line(exc))
            loaded.calls.counted = False
            opts = {"mode": config.torch_compile_mode, "backend": config.torch_compile_backend}
            chosen = {k: v for k, v in opts.items() if v is not None}
            model.forward = torch.compile(model.forward, **chosen)  # type: ignore[call-overload]
        else:
            model.forward = _counted(torch.compile(model.forward, backend=backend), loaded.calls)
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
