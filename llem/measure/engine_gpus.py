"""Whether llem measured every GPU the engine ran on: a check any engine feeds with the GPUs its
processes held in the window (the ``processes`` of its ``LoadedModel.window_facts``: a server's,
from its process tree).

A GPU the engine used that was not measured makes the run's energy invalid (its work there is
missing from every figure); a measured GPU it did not use is a condition (its idle power is in
the figures); GPUs that cannot be known leave the check not checked. The check is named after
the engine (``server_gpus``).
"""

from __future__ import annotations

from collections.abc import Sequence

from llem.result import Figure, RunResult
from llem.vocabulary.model import EngineGpus


def check_name(engine: str) -> str:
    return f"{engine}_gpus"


def judge_engine_gpus(result: RunResult, engine: str, found: EngineGpus) -> None:
    """``found`` judged against the GPUs the run measured (``result.hardware.gpus``), into
    ``result.validity`` (check ``<engine>_gpus``)."""
    validity = result.validity
    check = check_name(engine)
    if found.uuids is None:
        validity.checks[check] = "not checked"
        return
    measured = [g.uuid for g in result.hardware.gpus]
    problems, conditions = judge_gpus(found.uuids, measured, found.cover, found.who)
    validity.problems.extend(problems)
    validity.conditions.extend(conditions)
    validity.checks[check] = "failed" if problems else ("condition" if conditions else "passed")
    if problems and validity.energy_valid is not None:
        result.set_figure("validity.energy_valid", Figure(False))


def judge_gpus(
    used: Sequence[str], measured: Sequence[str], cover: str, who: str = "the engine"
) -> tuple[list[str], list[str]]:
    """(problems, conditions): a GPU ``who`` used that was not measured is a problem; a measured
    GPU it did not use is a condition."""
    missing = [u for u in used if u not in measured]
    idle = [u for u in measured if u not in used]
    problems = (
        [
            f"{who} runs on GPU(s) {', '.join(missing)}, which llem did not measure: its work "
            f"there is missing from the energy ({cover})"
        ]
        if missing
        else []
    )
    conditions = (
        [
            f"GPU(s) {', '.join(idle)} were measured but {who} has no process on them: their "
            "idle power is in the figures"
        ]
        if idle
        else []
    )
    return problems, conditions
