"""The model a Runner keeps between runs (``KeptModel``), on an engine double whose load keys
are planted: reused only when asked and only for an equal key; a kept model of another key is
freed before the new one loads, so two models never share the device."""

from __future__ import annotations

from llem.runner.kept_model import KeptModel
from llem.vocabulary.model import LoadedModel


class Engine:
    """Loads a model under its ``key`` and logs every load and unload, in order."""

    def __init__(self, key: str, log: list[str]) -> None:
        self.key, self.log = key, log

    def load_key(self, device: str) -> str:
        return self.key

    def load(self, device: str) -> LoadedModel:
        self.log.append(f"load {self.key}")
        return LoadedModel(object(), None, device, "float32", {}, self.key, 0.5, "here", None)

    def unload(self, loaded: LoadedModel | None) -> None:
        assert loaded is not None
        self.log.append(f"unload {loaded.load_key}")
        loaded.model = None


def test_an_equal_key_reuses_the_kept_model_and_another_frees_it_first() -> None:
    log: list[str] = []
    kept = KeptModel()
    a = Engine("a", log)
    first, reused = kept.acquire(a, "cpu", reuse=True)
    assert not reused
    kept.release(a, first, keep=True)
    again, reused = kept.acquire(Engine("a", log), "cpu", reuse=True)
    assert reused and again is first and log == ["load a"]
    kept.release(a, again, keep=True)
    other, reused = kept.acquire(Engine("b", log), "cpu", reuse=True)
    assert not reused and other is not first
    assert log == ["load a", "unload a", "load b"] and first.model is None


def test_without_reuse_an_equal_key_loads_again_and_nothing_is_kept() -> None:
    log: list[str] = []
    kept = KeptModel()
    a = Engine("a", log)
    first, _ = kept.acquire(a, "cpu", reuse=True)
    kept.release(a, first, keep=True)
    second, reused = kept.acquire(a, "cpu", reuse=False)
    assert not reused and log == ["load a", "unload a", "load a"]
    kept.release(a, second, keep=False)
    assert log[-1] == "unload a" and second.model is None
    kept.close()  # nothing kept: nothing more to free
    assert log == ["load a", "unload a", "load a", "unload a"]


def test_close_frees_the_kept_model_once() -> None:
    log: list[str] = []
    kept = KeptModel()
    a = Engine("a", log)
    first, _ = kept.acquire(a, "cpu", reuse=True)
    kept.release(a, first, keep=True)
    kept.close()
    kept.close()
    assert log == ["load a", "unload a"] and first.model is None
