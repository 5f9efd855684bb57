"""Load times kept between runs (llem.runner.load_times): per host and load key, bounded, written
atomically; a file that cannot be read or written is a warning, never a failed run. The Runner
records a fresh load, never a model it reused."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from llem.runner import Runner, load_times
from llem.runner.load_times import load_times_path, record_load, this_host_load_times
from llem.testing.cli import compose_tiny
from llem.vocabulary.model import LoadedModel

LOG = "llem.runner.load_times"


def test_recorded_times_read_back_per_host_oldest_first() -> None:
    record_load("key-a", 12.5, host="here")
    record_load("key-a", 14.0, host="here")
    record_load("key-b", 3.25, host="here")
    record_load("key-a", 99.0, host="elsewhere")
    assert this_host_load_times(host="here") == {"key-a": [12.5, 14.0], "key-b": [3.25]}
    assert this_host_load_times(host="elsewhere") == {"key-a": [99.0]}
    assert this_host_load_times(host="a third host") == {}
    data = json.loads(load_times_path().read_text())
    assert data["format"] == load_times.LOAD_TIMES_FORMAT
    here_a = [e for e in data["loads"] if (e["host"], e["key"]) == ("here", "key-a")]
    assert [t["s"] for t in here_a[0]["times"]] == [12.5, 14.0]
    assert all(t["at"].endswith("+00:00") for t in here_a[0]["times"])


def test_without_a_host_the_file_is_this_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(load_times.socket, "gethostname", lambda: "node-7")
    record_load("key", 5.0)
    assert this_host_load_times() == {"key": [5.0]}
    assert [e["host"] for e in json.loads(load_times_path().read_text())["loads"]] == ["node-7"]


def test_a_key_keeps_its_last_five_times() -> None:
    for s in range(1, 9):
        record_load("key", float(s), host="h")
    assert load_times.KEEP_PER_KEY == 5
    assert this_host_load_times(host="h") == {"key": [4.0, 5.0, 6.0, 7.0, 8.0]}


def test_the_file_keeps_the_keys_measured_most_recently(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(load_times, "MAX_KEYS", 3)
    for key in ("k1", "k2", "k3"):
        record_load(key, 1.0, host="h")
    record_load("k1", 2.0, host="h")  # measured again: now the most recent
    record_load("k4", 1.0, host="other")
    record_load("k5", 1.0, host="h")
    assert this_host_load_times(host="h") == {"k1": [1.0, 2.0], "k5": [1.0]}
    assert this_host_load_times(host="other") == {"k4": [1.0]}  # k2 and k3: dropped


def test_a_negative_or_non_finite_time_is_not_recorded() -> None:
    for bad in (-1.0, float("nan"), float("inf")):
        record_load("key", bad, host="h")
    assert not load_times_path().exists()


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        "[1, 2]",
        json.dumps({"format": 99, "loads": []}),
        json.dumps(
            {"format": 1, "loads": [{"host": "h", "key": "k", "times": [{"s": -3, "at": "x"}]}]}
        ),
        json.dumps(
            {"format": 1, "loads": [{"host": "h", "key": "k", "times": [{"s": "1", "at": "x"}]}]}
        ),
        json.dumps({"format": 1, "loads": [{"host": "h", "key": "k", "times": []}]}),
        json.dumps({"format": 1, "loads": [{"host": "h", "times": [{"s": 1, "at": "x"}]}]}),
    ],
)
def test_an_unreadable_file_is_ignored_with_one_warning_and_replaced(
    content: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = load_times_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    with caplog.at_level(logging.WARNING, logger=LOG):
        assert this_host_load_times(host="h") == {}
        assert this_host_load_times(host="h") == {}
        record_load("key", 4.0, host="h")
    warnings = [r.getMessage() for r in caplog.records if r.name == LOG]
    assert len(warnings) == 1 and "not readable" in warnings[0] and str(path) in warnings[0]
    assert this_host_load_times(host="h") == {"key": [4.0]}


def test_an_unwritable_cache_is_a_warning_not_an_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("LLEM_CACHE_DIR", str(blocker / "cache"))  # under a file: no directory
    with caplog.at_level(logging.WARNING, logger=LOG):
        record_load("key", 4.0, host="h")
        record_load("key", 5.0, host="h")
    warnings = [r.getMessage() for r in caplog.records if r.name == LOG]
    assert len(warnings) == 1 and str(load_times_path()) in warnings[0]


# ----------------------------------------------------------------------------- the Runner
PLANTED_LOAD_S = 7.25  # what the planted loads say they took


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[LoadedModel]:
    """Every model the pytorch backend loads, each saying it took ``PLANTED_LOAD_S``."""
    from llem.backends.pytorch import PyTorchBackend

    seen: list[LoadedModel] = []
    real = PyTorchBackend.load

    def load(self: PyTorchBackend, device: str) -> LoadedModel:
        loaded = real(self, device)
        loaded.load_s = PLANTED_LOAD_S + len(seen)
        seen.append(loaded)
        return loaded

    monkeypatch.setattr(PyTorchBackend, "load", load)
    return seen


def _cfg(tiny_model_dir: Path, *overrides: str):  # type: ignore[no-untyped-def]
    base = ("measurement.warmup=0", "decoder.max_new_tokens=2", "dataset.n_prompts=2")
    return compose_tiny(tiny_model_dir, *base, *overrides)


@pytest.mark.slow
def test_the_runner_records_a_fresh_load_and_not_a_reused_one(
    tiny_model_dir: Path, tmp_path: Path, loads: list[LoadedModel]
) -> None:
    runner = Runner()
    try:
        runner.run(_cfg(tiny_model_dir), tmp_path / "a", reuse_model=True)
        reused = runner.run(
            _cfg(tiny_model_dir, "pytorch.batch_size=2"), tmp_path / "b", reuse_model=True
        )
        other = runner.run(
            _cfg(tiny_model_dir, "model.dtype=float32"), tmp_path / "c", reuse_model=True
        )
    finally:
        runner.close()
    assert reused.lifecycle.model_reused and not other.lifecycle.model_reused
    assert this_host_load_times() == {
        loads[0].load_key: [PLANTED_LOAD_S],
        loads[1].load_key: [PLANTED_LOAD_S + 1],
    }


@pytest.mark.slow
def test_a_failed_load_is_not_recorded(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llem.backends.pytorch import PyTorchBackend

    def fails(self: PyTorchBackend, device: str) -> LoadedModel:
        raise RuntimeError("planted: the weights are unreadable")

    monkeypatch.setattr(PyTorchBackend, "load", fails)
    with pytest.raises(RuntimeError, match="planted"):
        Runner().run(_cfg(tiny_model_dir), tmp_path / "a")
    assert not load_times_path().exists()
