"""A third engine for tests: a config section, a row for the engine table and a driver module,
planted for one test (``plant``) so that the seam is checked with an engine that nothing in llem
names.

The section is set on an ``ExperimentConfig`` instance (``with_section``): it is no field of the
schema, and the table and the run layer reach it through the row's ``section``.
"""

from __future__ import annotations

import dataclasses
import sys
import types
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llem.config import engines
from llem.config.engines import Engine
from llem.config.schema import ExperimentConfig

if TYPE_CHECKING:
    import pytest

NAME = "fake"
DRIVER = "llem_fake_engine_driver"  # planted in sys.modules by ``plant``
PACKAGE = "llem_fake_engine_package"  # never installed
INSTALL_HINT = "pip install llem-fake-engine"
THREADS_REASON = "the fake engine runs its own threads"


@dataclass
class FakeConfig:
    """The fake engine's section (``fake:``)."""

    slots: int | None = None
    mode: str = "fast"


@dataclass
class FakeBackend:
    """What the fake driver's ``create_backend`` returns: the sections it was built with (and
    what pre-flight asks of every engine: whether it measures named GPUs)."""

    sections: Any

    def measures_named_gpus(self, measurement: Any) -> bool:
        return False


def row(**changes: Any) -> Engine:
    """The fake engine's row (``changes`` replace its fields)."""
    base = Engine(
        name=NAME,
        section=NAME,
        config=FakeConfig,
        driver=DRIVER,
        packages=(PACKAGE,),
        concurrency_knob="fake.slots",
        install_hint=INSTALL_HINT,
        preflight=f"{DRIVER}:preflight_problems",
        threads_reason=THREADS_REASON,
        instead={"vllm.max_num_seqs": "fake equivalent: fake.slots"},
    )
    return dataclasses.replace(base, **changes)


def _preflight_problems(sections: Any, device: str, has_cuda: bool) -> list[str]:
    return [f"fake pre-flight: slots={sections.engine.slots} device={device}"]


def plant(monkeypatch: pytest.MonkeyPatch, fake: Engine | None = None) -> Engine:
    """Add the fake row to the engine table and its driver module to ``sys.modules``."""
    fake = fake or row()
    others = tuple(e for e in engines.ENGINES if e.name != fake.name)
    monkeypatch.setattr(engines, "ENGINES", (*others, fake))
    driver = types.ModuleType(DRIVER)
    setattr(driver, "create_backend", FakeBackend)  # noqa: B010 (a module built here)
    setattr(driver, "preflight_problems", _preflight_problems)  # noqa: B010
    monkeypatch.setitem(sys.modules, DRIVER, driver)
    return fake


def with_section(
    backend: str | None, section: FakeConfig | None = None, **values: Any
) -> ExperimentConfig:
    """An ``ExperimentConfig`` with the fake section set (``backend``: its ``backend``)."""
    exp = ExperimentConfig(backend=backend, **values)
    setattr(exp, NAME, section or FakeConfig())
    return exp
