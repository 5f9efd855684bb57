"""The engine table (llem.config.engines): a row for every engine, and one generic rule that
refuses another engine's keys, for a planted third engine as for the two real ones."""

from __future__ import annotations

import importlib.util
import typing
from pathlib import Path

import pytest
import yaml

from llem.config import engines as table
from llem.config import knobs
from llem.config.engines import ENGINES, engine_problems
from llem.config.schema import ExperimentConfig
from llem.config.validate import cross_field_problems
from llem.testing import fake_engine
from llem.testing.fake_engine import FakeConfig, with_section

CONF = Path(table.__file__).resolve().parents[1] / "conf" / "backend"


@pytest.fixture
def with_fake(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_engine.plant(monkeypatch)


def _backend_yamls() -> dict[str, str]:
    """conf/backend/<option>.yaml -> the backend it selects."""
    return {p.stem: yaml.safe_load(p.read_text())["backend"] for p in CONF.glob("*.yaml")}


def test_every_backend_option_has_a_row_and_every_row_an_option() -> None:
    chosen = _backend_yamls()
    assert chosen, f"no backend options under {CONF}"
    assert all(option == name for option, name in chosen.items())
    assert sorted(chosen.values()) == sorted(e.name for e in ENGINES)


def test_every_row_names_its_schema_section_and_keys_that_exist() -> None:
    hints = typing.get_type_hints(ExperimentConfig)
    for e in ENGINES:
        assert hints[e.section] is e.config, e.name
        knobs.key(ExperimentConfig, e.concurrency_knob)  # raises for a key the schema lacks
        if e.threads_knob:
            knobs.key(ExperimentConfig, e.threads_knob)
        else:
            assert e.threads_reason, f"{e.name}: no threads knob and no reason"
        for key in e.instead:
            assert not key.startswith(f"{e.section}."), f"{e.name}: {key} is its own key"
            knobs.key(ExperimentConfig, key)
        assert importlib.util.find_spec(e.driver) is not None, e.driver
        if e.preflight:
            module, _, function = e.preflight.partition(":")
            assert function and importlib.util.find_spec(module) is not None, e.preflight


@pytest.mark.usefixtures("with_fake")
@pytest.mark.parametrize(
    ("backend", "now"), [("vllm", "vllm"), ("pytorch", "pytorch"), (None, "the default, pytorch")]
)
def test_a_third_engines_key_is_refused_under_another_backend(
    backend: str | None, now: str
) -> None:
    exp = with_section(backend, FakeConfig(slots=8))
    assert engine_problems(exp) == [f"fake.slots=8 needs +backend=fake (the backend is {now})"]
    assert f"fake.slots=8 needs +backend=fake (the backend is {now})" in cross_field_problems(exp)


@pytest.mark.usefixtures("with_fake")
def test_a_third_engines_defaults_pass_under_another_backend() -> None:
    assert engine_problems(with_section("vllm")) == []
    assert engine_problems(with_section(None)) == []


@pytest.mark.usefixtures("with_fake")
def test_under_the_third_engine_its_equivalents_come_from_its_row() -> None:
    exp = with_section("fake", FakeConfig(slots=8))
    exp.vllm.max_num_seqs = 16
    exp.pytorch.batch_size = 4
    assert engine_problems(exp) == [
        "pytorch.batch_size=4 needs +backend=pytorch (the backend is fake)",
        "vllm.max_num_seqs=16 does not apply to backend=fake (fake equivalent: fake.slots)",
    ]


def test_the_vllm_rules_are_the_generic_rule_with_vllms_row() -> None:
    exp = ExperimentConfig(backend="vllm")
    exp.pytorch.num_beams = 4
    (problem,) = engine_problems(exp)
    assert problem == (
        "pytorch.num_beams=4 does not apply to backend=vllm (vLLM equivalent: none; beam "
        "search is not measured through the vllm backend)"
    )
    assert table.engine("vllm").instead["pytorch.num_beams"] in problem


def test_the_transformers_only_keys_are_refused_by_one_rule_fed_by_each_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    instead = {"quantization": "fake.quant=int4", "passthrough_kwargs": "+fake.extra.NAME=V"}
    fake_engine.plant(monkeypatch, fake_engine.row(shared_instead=instead))
    exp = with_section("fake", FakeConfig())
    exp.quantization.load_in_8bit = True
    exp.passthrough_kwargs = {"low_cpu_mem_usage": True}
    assert engine_problems(exp) == [
        "quantization=bnb-8bit is the transformers bitsandbytes path and does not apply to "
        "backend=fake (use fake.quant=int4)",
        "passthrough_kwargs (low_cpu_mem_usage) are from_pretrained arguments and do not apply "
        "to backend=fake (use +fake.extra.NAME=V)",
    ]
    # a row that names neither takes both (the PyTorch engine's)
    exp.backend = "pytorch"
    assert not any("does not apply to backend" in p for p in engine_problems(exp))
