"""The config hash holds the active engine's section only: adding an engine (a toy one here, a
section in the schema and a row in the table) changes no existing configuration's hash."""

from __future__ import annotations

from dataclasses import dataclass, field, make_dataclass

import pytest

from llem.config.config_hash import config_hash, legacy_config_hash
from llem.config.schema import ExperimentConfig
from llem.testing import fake_engine

# the hash of the default configuration on the PyTorch engine, pinned when the rule was made
DEFAULT_PYTORCH = "826839aa094595c2"


@dataclass
class ToyConfig:
    slots: int = 4


def _with_toy_section() -> ExperimentConfig:
    """An ExperimentConfig whose schema holds one more engine section, ``fake`` (at defaults)."""
    schema = make_dataclass(
        "WithToy",
        [("fake", ToyConfig, field(default_factory=ToyConfig))],
        bases=(ExperimentConfig,),
    )
    exp = schema(backend="pytorch")
    assert isinstance(exp, ExperimentConfig)
    return exp


def test_the_default_configuration_keeps_its_pinned_hash() -> None:
    assert config_hash(ExperimentConfig(backend="pytorch")) == DEFAULT_PYTORCH


def test_a_new_engine_section_changes_no_existing_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_engine.plant(monkeypatch, fake_engine.row(config=ToyConfig))
    with_toy = _with_toy_section()
    assert config_hash(with_toy) == DEFAULT_PYTORCH
    # the rule before it hashed every section: the toy's would have moved every hash
    assert legacy_config_hash(with_toy) != legacy_config_hash(ExperimentConfig(backend="pytorch"))


def test_the_active_engine_section_is_hashed(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_engine.plant(monkeypatch, fake_engine.row(config=ToyConfig))
    toy = _with_toy_section()
    toy.backend = "fake"
    other = _with_toy_section()
    other.backend = "fake"
    other.fake.slots = 8  # type: ignore[attr-defined]
    assert config_hash(toy) != config_hash(other)
    assert config_hash(toy) != DEFAULT_PYTORCH
    # a PyTorch knob says nothing about a run on another engine
    moved = _with_toy_section()
    moved.backend = "fake"
    moved.pytorch.batch_size = 16
    assert config_hash(moved) == config_hash(toy)


def test_the_legacy_hash_is_the_one_written_before() -> None:
    # every section but an unconfigured server's (main at f452624)
    assert legacy_config_hash(ExperimentConfig(backend="pytorch")) == "199b5e1ba3f60a59"
