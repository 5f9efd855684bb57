"""torch.compile and the measured window: every batch shape the window will see compiles in the
warm-up (the last partial batch, other prompt widths), the window's compilations are counted, and
a run that compiled inside its window says so in its validity problems.

The tiny model on the CPU with Dynamo's ``eager`` backend: Dynamo traces, guards and recompiles
exactly as with Inductor, without generating code, so the test stays fast."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from llem.backends.pytorch import PyTorchBackend
from llem.testing.cli import run_tiny

TINY_DECODER = ("decoder.max_new_tokens=3", "decoder.min_new_tokens=3")

COMPILE = [
    "pytorch.torch_compile=true",
    "pytorch.torch_compile_backend=eager",
    # 3 builtin prompts of different widths in batches of 2: shapes (2, w1) and (1, w2)
    "dataset.n_prompts=3",
    "pytorch.batch_size=2",
    "measurement.warmup=1",
]


def _run(tiny_model_dir: Path, run_dir: Path, *overrides: str) -> dict[str, Any]:
    import torch

    torch._dynamo.reset()  # no compiled code from earlier tests
    return run_tiny(tiny_model_dir, run_dir, *TINY_DECODER, *overrides)


@pytest.mark.slow
def test_every_batch_shape_compiles_before_the_window(tiny_model_dir: Path, tmp_path: Path) -> None:
    result = _run(tiny_model_dir, tmp_path, *COMPILE)
    assert result["status"] == "ok"
    life, validity = result["lifecycle"], result["validity"]
    assert life["torch_compile"] == "active"
    assert life["compilations_in_window"] == 0
    assert validity["checks"]["compilations_in_window"] == "passed"
    assert not any("compiled" in p for p in validity["problems"])


@pytest.mark.slow
def test_a_compilation_inside_the_window_is_counted_and_named_in_the_problems(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The warm-up as it was: one batch shape only, so the partial batch compiles in the window."""
    monkeypatch.setattr(
        PyTorchBackend, "_batch_shape", staticmethod(lambda loaded, prompts: (0, 0))
    )
    result = _run(tiny_model_dir, tmp_path, *COMPILE)
    assert result["status"] == "ok"
    n = result["lifecycle"]["compilations_in_window"]
    assert n >= 1
    validity = result["validity"]
    assert validity["checks"]["compilations_in_window"] == "failed"
    assert any(
        f"compiled {n} time(s) inside the measured window" in p for p in validity["problems"]
    )


@pytest.mark.slow
def test_without_torch_compile_nothing_is_counted(tiny_model_dir: Path, tmp_path: Path) -> None:
    result = _run(tiny_model_dir, tmp_path, "dataset.n_prompts=3", "pytorch.batch_size=2")
    assert result["lifecycle"]["compilations_in_window"] is None
    assert "compilations_in_window" not in result["validity"]["checks"]


@pytest.mark.slow
def test_an_eager_fallback_in_the_window_is_counted_and_labelled(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """Dynamo's recompile limit reached in the warm-up: it stops compiling the forward, and every
    shape its one compiled graph does not fit (the other batch, each decode step's length) runs
    eagerly in the window, without a compilation or a warning. The run says what ran."""
    import torch

    with torch._dynamo.config.patch(recompile_limit=1, automatic_dynamic_shapes=False):
        result = _run(tiny_model_dir, tmp_path, *COMPILE)
    assert result["status"] == "ok"
    life, validity = result["lifecycle"], result["validity"]
    eager = life["eager_calls_in_window"]
    assert eager >= 1
    assert life["torch_compile"].startswith(f"eager fallback: {eager} of ")
    assert (
        "forward calls in the window ran eagerly (Dynamo's recompile limit"
        in (life["torch_compile"])
    )
    assert validity["checks"]["compilations_in_window"] == "condition"
    assert any(
        f"torch.compile ran {eager} forward call(s) in the measured window eagerly" in c
        for c in validity["conditions"]
    )


@pytest.mark.slow
def test_a_fully_compiled_window_runs_no_call_eagerly(tiny_model_dir: Path, tmp_path: Path) -> None:
    result = _run(tiny_model_dir, tmp_path, *COMPILE)
    assert result["lifecycle"]["eager_calls_in_window"] == 0
    assert result["lifecycle"]["torch_compile"] == "active"


@pytest.mark.slow
def test_without_torchs_backend_wrappers_it_still_compiles_and_leaves_eager_calls_unchecked(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The eager-fallback count builds on torch's private backend wrappers: a torch without them
    compiles as before, with the count null rather than the run losing torch.compile."""
    from llem.backends.pytorch import compile as compile_mod

    def gone(config: Any) -> Any:
        raise AttributeError("module 'torch' has no attribute '_TorchCompileWrapper'")

    monkeypatch.setattr(compile_mod, "_inner_backend", gone)
    result = _run(tiny_model_dir, tmp_path, *COMPILE)
    assert result["status"] == "ok"
    life = result["lifecycle"]
    assert life["torch_compile"] == "active"
    assert life["eager_calls_in_window"] is None
    assert life["compilations_in_window"] == 0
