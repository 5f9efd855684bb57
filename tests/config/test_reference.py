"""The configuration reference is generated from the schema, complete, and committed up to date."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from llem.config import knobs
from llem.config.knobs import Destination, Knob, Section, knob, range_problems, section
from llem.config.reference import REGENERATE_COMMAND, read_groups, render
from llem.config.schema import ExperimentConfig

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "docs" / "configuration.md"
FIELDS = list(knobs.walk_schema(ExperimentConfig))


def test_committed_reference_is_up_to_date():
    assert COMMITTED.exists(), (
        f"docs/configuration.md is missing; generate it with: {REGENERATE_COMMAND}"
    )
    assert COMMITTED.read_text() == render(), (
        f"docs/configuration.md is stale; regenerate it with: {REGENERATE_COMMAND}"
    )


def test_the_module_prints_the_reference():
    out = subprocess.run(
        [sys.executable, "-m", "llem.config.reference"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    assert out == render()


@pytest.mark.parametrize(
    "dotted,field", [(k, f) for k, f, _ in FIELDS], ids=[k for k, _, _ in FIELDS]
)  # ids by name: a Field's repr holds addresses, which differ between pytest-xdist's workers
def test_every_field_is_declared_with_a_one_line_doc(dotted, field):
    decl = knobs.declaration(field)
    assert isinstance(decl, (Knob, Section)), f"{dotted}: declare it with knob() or section()"
    assert decl.doc.strip() and "\n" not in decl.doc, f"{dotted}: needs a one-line doc"
    if isinstance(decl, Knob):
        assert isinstance(decl.goes_to, Destination)
        assert not dataclasses.is_dataclass(field.default_factory), f"{dotted}: use section()"
    else:
        assert knobs.section_class(field) is not None


def test_every_field_and_its_destination_is_in_the_reference():
    text = render()
    for dotted, field, _ in FIELDS:
        decl = knobs.declaration(field)
        if isinstance(decl, Knob):
            rows = [line for line in text.splitlines() if line.startswith(f"| `{dotted}` |")]
            assert any(f"`{decl.goes_to.name}`" in r and decl.doc in r for r in rows), dotted
        else:
            assert f"## `{dotted}`" in text


def test_every_option_file_is_in_the_reference_with_what_it_sets():
    text = render()
    groups = {g.name: g for g in read_groups(ROOT / "llem" / "conf")}
    assert {"model", "decoder", "quantization", "dataset", "measurement", "backend"} <= set(groups)
    for group in groups.values():
        for option in group.options:
            assert f"| `{option.name}` |" in text
    assert "`quantization.bnb_4bit_quant_type=nf4`" in text
    assert "`backend=pytorch`" in text  # a @package _global_ option sets root keys
    assert "`model.name_or_path=???` (required)" in text
    assert "| `decoder` | `creative`, `factual`, `greedy`, `standard` | `greedy` |" in text


def test_ranges_and_choices_are_shown():
    text = render()
    assert "| `decoder.top_p` | float or null | `null` | 0 to 1 | `generate` |" in text
    assert "| `pytorch.batch_size` | int | `1` | >= 1 | `llem` |" in text
    assert "`nf4`, `fp4`" in text
    assert "| `model.name_or_path` | str | required |" in text


# ------------------------------------------------------------------ the walker, on any dataclass
# A stand-in for a group another module adds (such as vllm): knobs.py knows no llem schema.
ENGINE = Destination("Engine", "a keyword argument of a made-up engine")


@dataclass
class _Engine:
    slots: int = knob(8, doc="Slots.", goes_to=ENGINE, ge=1, le=64)
    share: float | None = knob(None, doc="Share.", goes_to=ENGINE, gt=0, lt=1)


@dataclass
class _Root:
    engine: _Engine = section(_Engine, doc="An engine.")
    ids: list = knob(factory=list, doc="Ids.", goes_to=knobs.LLEM, ge=0)


def test_walker_names_keys_from_the_walk_and_reports_all_at_once():
    root = _Root()
    assert range_problems(root) == []
    root.engine.slots, root.engine.share, root.ids = 65, 1.0, [1, -2]
    assert range_problems(root) == [
        "engine.slots=65 is out of range (allowed: 1 to 64)",
        "engine.share=1.0 is out of range (allowed: > 0 and < 1)",
        "ids=[1,-2] is out of range (allowed: each >= 0)",
    ]
    assert [k for k, _, _ in knobs.walk(root)] == ["engine.slots", "engine.share", "ids"]


def test_reference_lists_another_groups_own_destination():
    assert "- `Engine`: a keyword argument of a made-up engine" in render(_Root)


def test_a_key_that_is_not_in_the_schema_fails_at_once():
    assert knobs.key(ExperimentConfig, "decoder.top_p") == "decoder.top_p"
    with pytest.raises(KeyError, match="decoder.top_q"):
        knobs.key(ExperimentConfig, "decoder.top_q")


def test_knob_takes_one_default():
    with pytest.raises(TypeError):
        knob(doc="x", goes_to=knobs.LLEM)
    with pytest.raises(TypeError):
        knob(1, factory=list, doc="x", goes_to=knobs.LLEM)  # type: ignore[call-overload]


def test_a_nested_config_not_yet_declared_with_section_is_still_checked():
    @dataclass
    class Plain:
        engine: _Engine = dataclasses.field(default_factory=_Engine)

    root = Plain()
    root.engine.slots = 0
    assert range_problems(root) == ["engine.slots=0 is out of range (allowed: 1 to 64)"]
