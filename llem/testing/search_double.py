"""A test double of a run for the search: figures as known functions of the knobs, plus noise.

``PlantedRun`` stands in for a measured point: energy per token falls with the batch size and
is least at a middling power limit; TPOT rises with the batch and rises as the power limit
clocks the GPU down. Under ``latency.tpot_ms.p90 <= 50`` the cheapest feasible configuration is
known exactly (``optimum``, computed without noise over every point), so a test can tell whether
a search found it, and after how many trials. ``noise`` is the relative standard deviation of a
seeded Gaussian on every figure.

``search_until`` drives ``llem.sweep.search.Search`` with the double, exactly as the sweeper
drives it with real runs (ask, measure, judge, tell), and says when the optimum was measured.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from llem.sweep.search import Search, judge
from llem.sweep.search_space import Choices, Space
from llem.sweep.search_spec import Constraint, SearchSpec

BATCH = "pytorch.batch_size"
POWER = "gpu.power_limit_w"
TPOT = "latency.tpot_ms.p90"
J_PER_TOKEN = "energy.j_per_output_token"


@dataclass
class PlantedRun:
    batches: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
    powers: tuple[int, ...] = (150, 200, 250, 300, 350, 400, 450, 500, 550, 600)
    tpot_limit_ms: float = 50.0
    noise: float = 0.005
    seed: int = 0
    _rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def space(self) -> Space:
        dims = [
            Choices(BATCH, tuple(str(b) for b in self.batches)),
            Choices(POWER, tuple(str(p) for p in self.powers)),
        ]
        return Space(fixed=[], dims=list(dims), order=[BATCH, POWER])

    def spec(self, seed: int, budget: int = 30, sampler: str = "tpe") -> SearchSpec:
        limit = Constraint(TPOT, "<=", self.tpot_limit_ms)
        return SearchSpec(J_PER_TOKEN, "minimize", (limit,), budget, seed, sampler)

    @staticmethod
    def truth(batch: int, power: float) -> dict[str, float]:
        """The figures without noise."""
        slowdown = (450.0 / power) ** 0.5 if power < 450 else 1.0
        tpot_ms = (20.0 + 0.3 * batch) * slowdown
        j_per_token = (10.0 / batch + 0.1) * (0.8 + 0.2 * ((power - 300.0) / 150.0) ** 2)
        return {TPOT: tpot_ms, J_PER_TOKEN: j_per_token}

    def measure(self, knobs: dict[str, str]) -> dict[str, float | None]:
        true = self.truth(int(knobs[BATCH]), float(knobs[POWER]))
        return {k: v * (1.0 + self._rng.gauss(0.0, self.noise)) for k, v in true.items()}

    def optimum(self) -> dict[str, str]:
        """The cheapest configuration whose true TPOT meets the limit."""
        feasible = [
            (self.truth(b, p)[J_PER_TOKEN], b, p)
            for b in self.batches
            for p in self.powers
            if self.truth(b, p)[TPOT] <= self.tpot_limit_ms
        ]
        _, b, p = min(feasible)
        return {BATCH: str(b), POWER: str(p)}


@dataclass(frozen=True)
class Found:
    measured_at: int | None  # 1-based trial at which the optimum was first measured
    reported: bool  # the search's best feasible trial is the optimum
    trials: int


def search_until(double: PlantedRun, spec: SearchSpec) -> Found:
    """Run a whole search on the double; when was the optimum measured, and was it reported."""
    search = Search(spec, double.space())
    target = double.optimum()
    measured_at = None
    while (proposal := search.ask()) is not None:
        verdict = judge(spec, double.measure(proposal.knobs))
        record = search.tell(proposal, str(search.searched), verdict)
        if measured_at is None and record.knobs == target:
            measured_at = search.searched
    best = search.record.best_trial()
    return Found(measured_at, best is not None and best.knobs == target, search.searched)
