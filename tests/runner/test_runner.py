"""The Runner: one run at a time, keeping a loaded model between runs only when asked and only
while the load key matches; ``close`` frees what it kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from llem.runner import Runner
from llem.testing.cli import compose_tiny
from llem.vocabulary.model import LoadedModel


def _cfg(tiny_model_dir: Path, *overrides: str):  # type: ignore[no-untyped-def]
    base = ("measurement.warmup=0", "decoder.max_new_tokens=2", "dataset.n_prompts=2")
    return compose_tiny(tiny_model_dir, *base, *overrides)


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[LoadedModel]:
    """Every model the pytorch backend loads, in order."""
    from llem.backends.pytorch import PyTorchBackend

    seen: list[LoadedModel] = []
    real = PyTorchBackend.load

    def load(self: PyTorchBackend, device: str) -> LoadedModel:
        loaded = real(self, device)
        seen.append(loaded)
        return loaded

    monkeypatch.setattr(PyTorchBackend, "load", load)
    return seen


@pytest.mark.slow
def test_a_kept_model_serves_the_next_run_with_the_same_load_key(
    tiny_model_dir: Path, tmp_path: Path, loads: list[LoadedModel]
) -> None:
    runner = Runner()
    first = runner.run(_cfg(tiny_model_dir), tmp_path / "a", reuse_model=True)
    # A decoder change keeps the model; the batch size reported is this run's own.
    second = runner.run(
        _cfg(tiny_model_dir, "decoder=creative", "pytorch.batch_size=2"),
        tmp_path / "b",
        reuse_model=True,
    )
    assert (first.lifecycle.model_reused, second.lifecycle.model_reused) == (False, True)
    assert second.lifecycle.load_s == 0.0 and second.workload.batch_size == 2
    assert len(loads) == 1 and loads[0].model is not None
    runner.close()
    assert loads[0].model is None  # close() frees the kept model


@pytest.mark.slow
def test_a_different_load_key_frees_the_kept_model_before_loading(
    tiny_model_dir: Path, tmp_path: Path, loads: list[LoadedModel]
) -> None:
    runner = Runner()
    runner.run(_cfg(tiny_model_dir), tmp_path / "a", reuse_model=True)
    result = runner.run(_cfg(tiny_model_dir, "model.dtype=float32"), tmp_path / "b")
    assert not result.lifecycle.model_reused
    assert len(loads) == 2 and loads[0].model is None
    assert loads[1].model is None  # reuse_model=false: not kept after the run


@pytest.mark.slow
def test_without_reuse_nothing_outlives_the_run(
    tiny_model_dir: Path, tmp_path: Path, loads: list[LoadedModel]
) -> None:
    runner = Runner()
    for name in ("a", "b"):
        assert not runner.run(_cfg(tiny_model_dir), tmp_path / name).lifecycle.model_reused
    assert len(loads) == 2 and all(loaded.model is None for loaded in loads)


@pytest.mark.slow
def test_two_runners_do_not_share_a_kept_model(
    tiny_model_dir: Path, tmp_path: Path, loads: list[LoadedModel]
) -> None:
    one, other = Runner(), Runner()
    one.run(_cfg(tiny_model_dir), tmp_path / "a", reuse_model=True)
    result = other.run(_cfg(tiny_model_dir), tmp_path / "b", reuse_model=True)
    assert not result.lifecycle.model_reused and len(loads) == 2
    one.close()
    other.close()


def test_a_live_display_keeps_batch_progress_off_the_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    from llem.runner.progress import BatchProgress

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert BatchProgress(3).tty
    assert not BatchProgress(3, live_display=True).tty
    assert Runner(live_display=True).live_display
