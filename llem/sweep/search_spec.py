"""What a search is asked to find: the objective, its direction, the constraints, budget, seed.

Declared as ``hydra.sweeper.*`` (on the command line or in a study file) and checked here before
anything runs: an objective or a constraint that names no numeric figure of result.json
(``llem.result.keys``), a constraint that does not read ``KEY OP NUMBER``, a budget below 1 or an
unknown direction or sampler is a ``ConfigError`` (exit 2) naming the key. ``check_energy`` turns
an objective or constraint on energy into the same error where the run's device can measure
none (a CPU without a replay trace), naming the keys that can be measured there; ``check_quality``
does the same for a ``quality.*`` key where the run's dataset scores no answer (``dataset=builtin``,
``synthetic``, a JSONL without ``dataset.scorer``): such a run has a null quality section, and a
trial without the figure is infeasible with its reason (``llem.sweep.search_verdict``).

A constraint's value for the sampler (Optuna's convention: <= 0 is met) is the relative excess
over its bound, so that constraints in ms and in fractions weigh alike in how far a trial missed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from llem.errors import ConfigError
from llem.result.keys import needs_energy, numeric_keys

DIRECTIONS = ("minimize", "maximize")
SAMPLERS = ("tpe", "gp", "random")
OPERATORS = ("<=", ">=", "<", ">")

_CONSTRAINT = re.compile(
    r"^\s*(?P<key>[A-Za-z_][\w.]*)\s*(?P<op><=|>=|<|>)\s*(?P<bound>[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?)\s*$"
)
_EXAMPLES = "energy.j_per_output_token, throughput.output_tokens_per_s, latency.tpot_ms.p90"


@dataclass(frozen=True)
class Constraint:
    key: str
    op: str
    bound: float

    @property
    def text(self) -> str:
        return f"{self.key} {self.op} {self.bound:g}"

    def met(self, value: float) -> bool:
        return {
            "<=": value <= self.bound,
            ">=": value >= self.bound,
            "<": value < self.bound,
            ">": value > self.bound,
        }[self.op]

    def violation(self, value: float) -> float:
        """How far ``value`` is over the bound, relative to the bound (<= 0: met; a strict
        bound that is only touched counts as a small miss)."""
        scale = abs(self.bound) or 1.0
        excess = (value - self.bound) if self.op in ("<=", "<") else (self.bound - value)
        if not self.met(value):
            return max(excess / scale, 1e-9)
        return min(excess / scale, 0.0)


@dataclass(frozen=True)
class SearchSpec:
    objective: str
    direction: str = "minimize"
    constraints: tuple[Constraint, ...] = field(default_factory=tuple)
    budget: int = 20
    seed: int = 0
    sampler: str = "tpe"

    @property
    def keys(self) -> list[str]:
        """The result keys a trial must hold: the objective, then each constrained one."""
        return [self.objective] + [c.key for c in self.constraints if c.key != self.objective]

    def better(self, a: float, b: float) -> bool:
        """Whether objective value ``a`` beats ``b``."""
        return a < b if self.direction == "minimize" else a > b

    def describe(self) -> str:
        where = "; ".join(c.text for c in self.constraints) or "no constraints"
        return (
            f"{self.direction} {self.objective} subject to {where}; budget {self.budget} "
            f"trials, sampler {self.sampler}, seed {self.seed}"
        )


def _check_key(name: str, key: object) -> str:
    if not isinstance(key, str) or not key.strip():
        raise ConfigError(
            f"{name}={key}: not a result key (allowed: a numeric figure of result.json such as "
            f"{_EXAMPLES})"
        )
    key = key.strip()
    if key not in numeric_keys():
        near = [k for k in numeric_keys() if k.rsplit(".", 1)[-1] == key.rsplit(".", 1)[-1]]
        allowed = ", ".join(near[:4]) if near else _EXAMPLES
        raise ConfigError(
            f"{name}={key}: not a numeric figure of result.json (allowed: {allowed}; "
            "every key: README 'Search')"
        )
    return key


def parse_constraint(index: int, text: object) -> Constraint:
    name = f"hydra.sweeper.constraints[{index}]"
    m = _CONSTRAINT.match(text) if isinstance(text, str) else None
    if m is None:
        raise ConfigError(
            f"{name}={text!r}: not 'KEY OP NUMBER' (allowed: OP one of "
            f"{', '.join(OPERATORS)}, e.g. 'latency.tpot_ms.p90 <= 50')"
        )
    key = _check_key(name, m["key"])
    bound = float(m["bound"])
    if not math.isfinite(bound):
        raise ConfigError(f"{name}={text!r}: the bound must be a finite number")
    return Constraint(key=key, op=m["op"], bound=bound)


def make_spec(
    objective: object,
    direction: object,
    constraints: object,
    budget: object,
    seed: object,
    sampler: object,
) -> SearchSpec:
    """The declaration as the sweeper got it (config values: anything may have been written),
    checked; the first problem is a ConfigError."""
    if objective is None:
        raise ConfigError(
            "hydra.sweeper.objective is not set (allowed: a numeric figure of result.json such "
            f"as {_EXAMPLES})"
        )
    key = _check_key("hydra.sweeper.objective", objective)
    if str(direction) not in DIRECTIONS:
        raise ConfigError(
            f"hydra.sweeper.direction={direction}: allowed values are {', '.join(DIRECTIONS)}"
        )
    items: list[object] | tuple[object, ...]
    if constraints is None:
        items = []
    elif isinstance(constraints, str):
        items = [constraints]
    elif isinstance(constraints, (list, tuple)):
        items = constraints
    else:
        raise ConfigError(
            f"hydra.sweeper.constraints={constraints}: not a list of constraints (allowed: "
            "'KEY OP NUMBER' or a list of them, e.g. 'latency.tpot_ms.p90 <= 50')"
        )
    parsed = tuple(parse_constraint(i, c) for i, c in enumerate(items))
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ConfigError(f"hydra.sweeper.budget={budget}: must be a whole number of trials >= 1")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"hydra.sweeper.seed={seed}: must be a whole number")
    if str(sampler) not in SAMPLERS:
        raise ConfigError(
            f"hydra.sweeper.sampler={sampler}: allowed values are {', '.join(SAMPLERS)}"
        )
    return SearchSpec(
        objective=key,
        direction=str(direction),
        constraints=parsed,
        budget=budget,
        seed=seed,
        sampler=str(sampler),
    )


def check_energy(spec: SearchSpec, why_none: str | None) -> None:
    """A ConfigError when the search needs an energy figure and ``why_none`` says the device
    measures no energy; it names the figures that can be searched there."""
    if why_none is None:
        return
    wanted = [k for k in spec.keys if needs_energy(k)]
    if not wanted:
        return
    shown = "throughput.output_tokens_per_s, latency.ttft_ms.p90, latency.tpot_ms.p90"
    role = "hydra.sweeper.objective" if wanted[0] == spec.objective else "hydra.sweeper.constraints"
    raise ConfigError(
        f"{role}: {wanted[0]} needs measured energy, and {why_none} (allowed here: figures "
        f"without energy, such as {shown}; or measurement.energy=replay with "
        "measurement.replay_trace)"
    )


QUALITY_PREFIX = "quality."


def check_quality(spec: SearchSpec, why_none: str | None) -> None:
    """A ConfigError when the search reads a ``quality.*`` figure and ``why_none`` says the
    run's dataset scores no answer."""
    if why_none is None:
        return
    wanted = [k for k in spec.keys if k.startswith(QUALITY_PREFIX)]
    if not wanted:
        return
    role = "hydra.sweeper.objective" if wanted[0] == spec.objective else "hydra.sweeper.constraints"
    raise ConfigError(
        f"{role}: {wanted[0]} needs scored answers, and {why_none} (allowed: dataset=arithmetic, "
        "dataset=lm_eval with dataset.task, or dataset=jsonl with a reference per line and "
        "dataset.scorer)"
    )


#: the footprint figures a search can read, by the start of their name, and what each needs set
FOOTPRINT_NEEDS = (
    (
        ("carbon_g", "g_per_"),
        ("carbon.intensity_g_per_kwh", "carbon.country", "carbon.zone"),
        "a grid intensity",
    ),
    (("energy_cost", "energy_usd_"), ("cost.usd_per_kwh",), "an energy price"),
    (("capacity_",), ("cost.usd_per_gpu_hour", "cost.usd_per_node_hour"), "a capacity price"),
)


def check_footprint(spec: SearchSpec, given: Callable[[str], bool]) -> None:
    """A ConfigError when the search reads a carbon or cost figure and the run is given nothing
    to compute it from (``given(key)``: the config sets ``key``): such a run's figure is null,
    and every trial would be infeasible for it."""
    for key in spec.keys:
        if not key.startswith("footprint."):
            continue
        leaf = key.rsplit(".", 1)[-1]
        for starts, needs, what in FOOTPRINT_NEEDS:
            if leaf.startswith(starts) and not any(given(k) for k in needs):
                role = (
                    "hydra.sweeper.objective"
                    if key == spec.objective
                    else "hydra.sweeper.constraints"
                )
                raise ConfigError(
                    f"{role}: {key} needs {what}, and none is given (allowed: set "
                    f"{' or '.join(needs)}; docs/footprint.md)"
                )
