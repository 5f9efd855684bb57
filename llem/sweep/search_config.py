"""What the search reads from a point's composed configuration: whether its runs can measure
energy (``energy_unavailable``) or score answers (``quality_unavailable``), for an objective or
constraint on them to be refused before anything runs, and the traffic seed that confirmations
step on (``drawn_seed``)."""

from __future__ import annotations

from typing import cast

from omegaconf import DictConfig

from llem.config.dataset import DatasetConfig, scores


def energy_unavailable(cfg: DictConfig, has_cuda: bool, local: bool) -> str | None:
    """Why a run of ``cfg`` can measure no energy (None: it may). A launcher that runs points
    elsewhere (a cluster) decides the device there, so only an explicit CPU counts then."""
    measurement = cfg.get("measurement")
    energy = str(measurement.get("energy", "auto")) if measurement is not None else "auto"
    device = str(cfg.get("device", "auto"))
    if energy.endswith("replay"):
        return None
    if energy.endswith("none"):
        return "measurement.energy=none measures none"
    on_cpu = device.endswith("cpu") or (device.endswith("auto") and local and not has_cuda)
    if on_cpu:
        why = "device=cpu" if device.endswith("cpu") else "device=auto finds no CUDA GPU here"
        return f"{why}, where NVML measures nothing"
    return None


def quality_unavailable(cfg: DictConfig, swept: list[str]) -> str | None:
    """Why a run of ``cfg`` scores no answer, so has no quality section (None: it may score,
    or the dataset is searched over and some point may), by ``llem.config.dataset.scores``."""
    if any(k == "dataset" or k.startswith("dataset.") for k in swept):
        return None
    dataset = cfg.get("dataset")
    if dataset is None:
        return "the run has no dataset section"
    if scores(cast(DatasetConfig, dataset)):  # the dataset config's own rule
        return None
    source = str(dataset.get("source", "builtin")).rsplit(".", 1)[-1]
    scorer = "" if source != "jsonl" else " without dataset.scorer"
    return f"dataset.source={source}{scorer} scores no answer"


def drawn_seed(cfg: DictConfig) -> int | None:
    """The searched ``traffic.seed`` where the traffic draws its send times from it (poisson,
    gamma): confirmations run with the next seeds; None for traffic that draws nothing."""
    traffic = cfg.get("traffic")
    if traffic is None or not str(traffic.get("kind", "")).endswith(("poisson", "gamma")):
        return None
    seed = traffic.get("seed", 0)
    return int(seed) if isinstance(seed, int) and not isinstance(seed, bool) else None
