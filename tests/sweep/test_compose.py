"""Grid points composed once per set of group choices give exactly Hydra's own job configs (and,
with the ``hydra`` node, exactly what Hydra's launcher would compose for each job)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hydra import initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.types import RunMode
from omegaconf import OmegaConf, open_dict

from llem.config.store import register_configs
from llem.hydra.compose.points import PointComposer


@pytest.fixture()
def loader_and_master() -> Iterator[tuple[object, object]]:
    register_configs()
    with initialize_config_module("llem.conf", version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        master = loader.load_configuration("config", overrides=[], run_mode=RunMode.MULTIRUN)
        yield loader, master


def hydra_itself(loader: object, master: object, overrides: list[str]) -> str:
    cfg = loader.load_sweep_config(master, overrides)  # type: ignore[attr-defined]
    with open_dict(cfg):
        del cfg["hydra"]
    return OmegaConf.to_yaml(cfg)


POINTS = [
    ["pytorch.batch_size=4"],
    ["decoder=creative", "decoder.temperature=0.3", "pytorch.batch_size=8"],
    ["decoder=creative", "pytorch.batch_size=2"],
    ["+backend=pytorch", "quantization=bnb-4bit", "decoder.max_new_tokens=7"],
    ["dataset=synthetic", "dataset.input_tokens=16", "repeat=3"],
    ["pytorch.max_memory={0: 10GiB}", "pytorch.batch_size=2"],  # a dict value: whole composition
    ["decoder=greedy", "~dataset.seed", "+passthrough_kwargs.low_cpu_mem_usage=true"],
    ["decoder=greedy", "~decoder.top_k"],  # an error (nothing to delete), the same one
]


def outcome(compose, overrides: list[str]) -> str:
    try:
        cfg = compose(overrides)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return cfg if isinstance(cfg, str) else OmegaConf.to_yaml(cfg)


@pytest.mark.slow
def test_each_point_equals_hydras_own_composition(loader_and_master) -> None:
    loader, master = loader_and_master
    composer = PointComposer(loader, master)
    for overrides in POINTS:
        ours = outcome(composer.compose, overrides)
        assert ours == outcome(lambda o: hydra_itself(loader, master, o), overrides), overrides
    assert composer.full_compositions < len(POINTS)


def test_the_defaults_are_composed_once_per_set_of_group_choices(loader_and_master) -> None:
    loader, master = loader_and_master
    composer = PointComposer(loader, master)
    for decoder in ("greedy", "creative"):
        for bs in range(1, 6):
            cfg = composer.compose([f"decoder={decoder}", f"pytorch.batch_size={bs}"])
            assert cfg.pytorch.batch_size == bs
    assert composer.full_compositions == 2
    # a point's overrides never leak into the next point's copy
    assert composer.compose(["decoder=greedy"]).pytorch.batch_size == hydra_itself_bs(
        loader, master
    )


def hydra_itself_bs(loader: object, master: object) -> int:
    return int(loader.load_sweep_config(master, ["decoder=greedy"]).pytorch.batch_size)  # type: ignore[attr-defined]


def test_a_bad_value_fails_with_hydras_message(loader_and_master) -> None:
    loader, master = loader_and_master
    composer = PointComposer(loader, master)
    with pytest.raises(Exception) as ours:
        composer.compose(["decoder.temperature=hot"])
    with pytest.raises(Exception) as theirs:
        hydra_itself(loader, master, ["decoder.temperature=hot"])
    assert str(ours.value) == str(theirs.value)
    assert "decoder.temperature=hot" in str(ours.value)


@pytest.mark.slow
def test_a_whole_job_config_equals_what_hydras_launcher_composes(loader_and_master) -> None:
    """The config an in-process sweep hands ``run_job``: hydra node, overrides and all."""
    loader, _ = loader_and_master
    master = loader.load_configuration(  # type: ignore[attr-defined]
        "config",
        overrides=["hydra.sweep.dir=out/s", "pytorch.batch_size=1,2", "hydra.mode=MULTIRUN"],
        run_mode=RunMode.MULTIRUN,
    )
    composer = PointComposer(loader, master)
    for k, point in enumerate(POINTS):
        job = [*point, f"hydra.sweep.subdir={k}"]
        ours = outcome(composer.job_config, job)
        theirs = outcome(lambda o: loader.load_sweep_config(master, o), job)  # type: ignore[attr-defined]
        assert ours == theirs, job
    cfg = composer.job_config([*POINTS[1], "hydra.sweep.subdir=1"])
    assert list(cfg.hydra.overrides.task) == POINTS[1]
    assert cfg.hydra.sweep.dir == "out/s" and cfg.hydra.sweep.subdir == "1"
    assert "decoder.temperature=0.3" in cfg.hydra.job.override_dirname
    assert composer.full_compositions < len(POINTS)
