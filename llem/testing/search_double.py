"""Test doubles of a run for the search: figures as known functions of the knobs, plus noise.

``PlantedRun`` stands in for a measured point: energy per token falls with the batch size and
is least at a middling power limit; TPOT rises with the batch and rises as the power limit
clocks the GPU down. Under ``latency.tpot_ms.p90 <= 50`` the cheapest feasible configuration is
known exactly (``optimum``, computed without noise over every point), so a test can tell whether
a search found it, and after how many trials. Its grid is a parameter (``batches``, ``powers``):
``PlantedRun.sized(25 | 100 | 400)`` gives spaces of those sizes, each with a unique optimum.

``PlantedServing`` has another shape: a category (``quantization``, 4 options) times an ordered
knob (``vllm.max_num_seqs``, 25 values); output tokens per joule is maximized under
``goodput.fraction >= 0.95``. Each category has its own peak; the best unconstrained points lie
where goodput collapses, and the true optimum is an interior peak of one category, not on the
constraint's edge.

``noise`` is the relative standard deviation of a seeded Gaussian on every figure.

**The SLO edge.** ``PlantedRun.sized(400)`` puts the optimum (batch 80 at 360 W, TPOT 49.2 ms) 1.6%
under ``latency.tpot_ms.p90 <= 50``, with two cheaper configurations 1.6% and 2.0% over it (batch 90
at 385 W, 50.8 ms; batch 80 at 335 W, 51.0 ms): with 1-4% noise a single run of either can pass
the constraint. ``feasible`` judges a configuration on its true figures, so a test or a bench can
tell whether the configuration a search reports is feasible in truth.

``search_until`` drives ``llem.sweep.search.Search`` with a double, exactly as the sweeper
drives it with real runs (ask, measure, judge, tell), and says when the optimum was measured.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from llem.sweep.search import Search
from llem.sweep.search_file import SearchRecord
from llem.sweep.search_space import Choices, Space
from llem.sweep.search_spec import Constraint, SearchSpec
from llem.sweep.search_verdict import judge

BATCH = "pytorch.batch_size"
POWER_LIMIT = "gpu.power_limit_w"
TPOT_P90 = "latency.tpot_ms.p90"
J_PER_TOKEN = "energy.j_per_output_token"

QUANT = "quantization"
SEQS = "vllm.max_num_seqs"
TOKENS_PER_J = "energy.output_tokens_per_j"
GOODPUT = "goodput.fraction"


@dataclass
class Planted:
    """What every double shares: seeded noise, the space, the true optimum."""

    noise: float = 0.005
    seed: int = 0
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def dims(self) -> list[Choices]:
        raise NotImplementedError

    def spec(self, seed: int, budget: int = 30, sampler: str = "tpe") -> SearchSpec:
        raise NotImplementedError

    def figures(self, knobs: dict[str, str]) -> dict[str, float]:
        """The figures of the configuration ``knobs``, without noise."""
        raise NotImplementedError

    def space(self) -> Space:
        dims = self.dims()
        return Space(fixed=[], dims=list(dims), order=[d.key for d in dims])

    def measure(self, knobs: dict[str, str]) -> dict[str, float | None]:
        true = self.figures(knobs)
        return {k: v * (1.0 + self._rng.gauss(0.0, self.noise)) for k, v in true.items()}

    def feasible(self, knobs: dict[str, str]) -> bool:
        """Whether the configuration's true figures meet every constraint."""
        true = self.figures(knobs)
        return all(c.met(true[c.key]) for c in self.spec(0).constraints)

    def optimum(self) -> dict[str, str]:
        """The best configuration whose true figures meet every constraint (unique)."""
        spec = self.spec(0)
        ranked = sorted(
            (self.figures(k)[spec.objective], i, k)
            for i, k in enumerate(self.space().every_point())
            if self.feasible(k)
        )
        if spec.direction == "maximize":
            ranked.reverse()
        if len(ranked) > 1 and ranked[0][0] == ranked[1][0]:
            raise ValueError("the planted function has two optima")
        return ranked[0][2]


@dataclass
class PlantedRun(Planted):
    batches: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
    powers: tuple[int, ...] = (150, 200, 250, 300, 350, 400, 450, 500, 550, 600)
    tpot_limit_ms: float = 50.0

    @classmethod
    def sized(cls, size: int, noise: float = 0.005, seed: int = 0) -> PlantedRun:
        """A space of ``size`` (25, 100 or 400) configurations."""
        grids = {
            25: ((48, 64, 80, 96, 112), (225, 300, 375, 450, 525)),
            100: (cls.batches, cls.powers),
            400: (tuple(range(10, 201, 10)), tuple(range(160, 636, 25))),
        }
        if size not in grids:
            raise ValueError(f"size={size} (allowed: {', '.join(map(str, grids))})")
        batches, powers = grids[size]
        return cls(noise=noise, seed=seed, batches=batches, powers=powers)

    def dims(self) -> list[Choices]:
        return [
            Choices(BATCH, tuple(str(b) for b in self.batches)),
            Choices(POWER_LIMIT, tuple(str(p) for p in self.powers)),
        ]

    def spec(self, seed: int, budget: int = 30, sampler: str = "tpe") -> SearchSpec:
        limit = Constraint(TPOT_P90, "<=", self.tpot_limit_ms)
        return SearchSpec(J_PER_TOKEN, "minimize", (limit,), budget, seed, sampler)

    @staticmethod
    def truth(batch: int, power: float) -> dict[str, float]:
        """The figures without noise."""
        slowdown = (450.0 / power) ** 0.5 if power < 450 else 1.0
        tpot_ms = (20.0 + 0.3 * batch) * slowdown
        j_per_token = (10.0 / batch + 0.1) * (0.8 + 0.2 * ((power - 300.0) / 150.0) ** 2)
        return {TPOT_P90: tpot_ms, J_PER_TOKEN: j_per_token}

    def figures(self, knobs: dict[str, str]) -> dict[str, float]:
        return self.truth(int(knobs[BATCH]), float(knobs[POWER_LIMIT]))


# per category: (tokens/J at its peak, max_num_seqs at the peak, the peak's width, the
# max_num_seqs at which goodput falls to one half)
_SERVING = {
    "none": (60.0, 160.0, 80.0, 130.0),
    "bnb-8bit": (46.0, 48.0, 30.0, 200.0),
    "bnb-4bit": (50.0, 120.0, 50.0, 110.0),
    "bnb-4bit-fp4": (42.0, 24.0, 20.0, 150.0),
}


@dataclass
class PlantedServing(Planted):
    """Maximize tokens per joule under ``goodput.fraction >= 0.95``: a categorical knob of 4
    options times an ordered one of 25; the optimum is ``quantization=bnb-8bit
    vllm.max_num_seqs=48``, 3.5% above its neighbours, with better but infeasible points
    (``none`` at 104 and above) where goodput collapses."""

    seqs: tuple[int, ...] = tuple(range(8, 201, 8))
    goodput_floor: float = 0.95

    def dims(self) -> list[Choices]:
        return [
            Choices(QUANT, tuple(_SERVING)),
            Choices(SEQS, tuple(str(n) for n in self.seqs)),
        ]

    def spec(self, seed: int, budget: int = 30, sampler: str = "tpe") -> SearchSpec:
        floor = Constraint(GOODPUT, ">=", self.goodput_floor)
        return SearchSpec(TOKENS_PER_J, "maximize", (floor,), budget, seed, sampler)

    @staticmethod
    def truth(quant: str, seqs: int) -> dict[str, float]:
        """The figures without noise."""
        peak, at, width, half = _SERVING[quant]
        tokens_per_j = peak * math.exp(-0.5 * ((seqs - at) / width) ** 2)
        goodput = 1.0 / (1.0 + (seqs / half) ** 8)
        return {TOKENS_PER_J: tokens_per_j, GOODPUT: goodput}

    def figures(self, knobs: dict[str, str]) -> dict[str, float]:
        return self.truth(knobs[QUANT], int(knobs[SEQS]))


@dataclass(frozen=True)
class OptimumFound:
    measured_at: int | None  # 1-based trial at which the optimum was first measured
    reported: bool  # the search's best feasible trial is the optimum
    trials: int
    record: SearchRecord = field(compare=False, repr=False)


def search_until(
    double: Planted, spec: SearchSpec, stop_after: int | None = None, confirm: int = 0
) -> OptimumFound:
    """Run a whole search on the double (with ``confirm`` confirmations of its best); when was
    the optimum measured, and was it reported. With ``stop_after``, the search stops early once
    the optimum was measured and at least ``stop_after`` trials ran (a bench's time saver;
    ``reported`` then is of those trials)."""
    search = Search(spec, double.space(), confirm=confirm)
    target = double.optimum()
    measured_at = None
    while (proposal := search.ask()) is not None:
        verdict = judge(spec, double.measure(proposal.knobs))
        record = search.tell(proposal, str(len(search.record.trials)), verdict)
        if measured_at is None and record.knobs == target:
            measured_at = search.searched
        if measured_at is not None and stop_after is not None and search.searched >= stop_after:
            break
    best = search.record.best_trial()
    reported = best is not None and best.knobs == target
    return OptimumFound(measured_at, reported, search.searched, search.record)
