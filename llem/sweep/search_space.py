"""A search's space: the grid's sweep expressions, read as dimensions the sampler chooses from.

The command line (and ``hydra.sweeper.params``) is parsed by Hydra exactly as for the grid: a
plain override is fixed for every trial; a list, ``range()`` or ``choice()`` is a set of choices;
``interval(lo,hi)`` is a continuous range (``tag(log,interval(...))`` samples it on a log scale;
written with whole-number ends it gives whole numbers). Choices that are all numbers are ordered
(the sampler sees them as neighbours by value, which is what a batch size or a power limit is);
any other choices are categories.

A trial's knobs are the values of the dimensions as override text (``{"vllm.max_num_seqs": "32"}``);
``overrides`` turns them into the trial's command line, ``knobs_of`` reads them back from a
finished result's overrides (resume).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from llem.errors import ConfigError

if TYPE_CHECKING:
    from hydra.core.override_parser.types import IntervalSweep, Override
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
    from optuna.trial import Trial

    Distribution = CategoricalDistribution | IntDistribution | FloatDistribution

_WHOLE = re.compile(r"^[-+]?\d+$")


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class Choices:
    key: str
    values: tuple[str, ...]  # as override text, in the order given

    @property
    def ordered(self) -> bool:
        return len(self.values) > 2 and all(_number(v) is not None for v in self.values)

    @property
    def by_value(self) -> tuple[str, ...]:
        return tuple(sorted(self.values, key=lambda v: _number(v) or 0.0))

    def distribution(self) -> CategoricalDistribution | IntDistribution:
        from optuna.distributions import CategoricalDistribution, IntDistribution

        if self.ordered:
            return IntDistribution(0, len(self.values) - 1)
        return CategoricalDistribution(list(self.values))

    def suggest(self, trial: Trial) -> str:
        if self.ordered:
            return self.by_value[trial.suggest_int(self.key, 0, len(self.values) - 1)]
        return str(trial.suggest_categorical(self.key, list(self.values)))

    def param(self, value: str) -> int | str | None:
        """The sampler's value for knob text ``value`` (None: not one of the choices): its
        index by value where the choices are ordered, else the text itself."""
        if self.ordered:
            n = _number(value)
            for i, v in enumerate(self.by_value):
                if v == value or (n is not None and _number(v) == n):
                    return i
            return None
        return value if value in self.values else None

    def describe(self) -> str:
        return ",".join(self.values)


@dataclass(frozen=True)
class Interval:
    key: str
    low: float
    high: float
    log: bool
    whole: bool  # both ends written as whole numbers: whole-number values

    def distribution(self) -> IntDistribution | FloatDistribution:
        from optuna.distributions import FloatDistribution, IntDistribution

        if self.whole:
            return IntDistribution(int(self.low), int(self.high), log=self.log)
        return FloatDistribution(self.low, self.high, log=self.log)

    def text(self, value: float) -> str:
        return str(int(round(value))) if self.whole else f"{value:.6g}"

    def suggest(self, trial: Trial) -> str:
        if self.whole:
            low, high = int(self.low), int(self.high)
            return self.text(trial.suggest_int(self.key, low, high, log=self.log))
        return self.text(trial.suggest_float(self.key, self.low, self.high, log=self.log))

    def param(self, value: str) -> float | None:
        n = _number(value)
        if n is None or not self.low <= n <= self.high:
            return None
        return int(round(n)) if self.whole else n

    def describe(self) -> str:
        inner = f"interval({self.text(self.low)},{self.text(self.high)})"
        return f"tag(log,{inner})" if self.log else inner


Dimension = Choices | Interval


@dataclass
class Space:
    fixed: list[str]  # overrides every trial gets, as written (``key=value``)
    dims: list[Dimension]
    order: list[str]  # every key in command-line order (fixed ones and dimensions)

    @property
    def keys(self) -> list[str]:
        return [d.key for d in self.dims]

    @property
    def size(self) -> int | None:
        """How many configurations the space holds (None: it has a continuous dimension)."""
        if any(isinstance(d, Interval) for d in self.dims):
            return None
        return math.prod(len(d.values) for d in self.dims if isinstance(d, Choices))

    def distributions(self) -> dict[str, Distribution]:
        return {d.key: d.distribution() for d in self.dims}

    def suggest(self, trial: Trial) -> dict[str, str]:
        return {d.key: d.suggest(trial) for d in self.dims}

    def params(self, knobs: dict[str, str]) -> dict[str, float | str] | None:
        """The sampler's values for ``knobs``; None when one lies outside the space."""
        out: dict[str, float | str] = {}
        for d in self.dims:
            value = d.param(knobs[d.key]) if d.key in knobs else None
            if value is None:
                return None
            out[d.key] = value
        return out

    def overrides(self, knobs: dict[str, str]) -> list[str]:
        """The trial's command line: every fixed override and every knob, in the order given."""
        fixed = {f.split("=", 1)[0]: f for f in self.fixed}
        return [fixed[k] if k in fixed else f"{k}={knobs[k]}" for k in self.order]

    def knobs_of(self, overrides: Sequence[str]) -> dict[str, str] | None:
        """A finished trial's knobs read from its overrides; None when it is not a point of this
        space (a knob missing or outside it, or a fixed override that differs)."""
        given = {o.split("=", 1)[0]: o for o in overrides if "=" in o}
        if any(given.get(f.split("=", 1)[0]) != f for f in self.fixed):
            return None
        knobs = {}
        for d in self.dims:
            text = given.get(d.key)
            if text is None:
                return None
            knobs[d.key] = text.split("=", 1)[1]
        return knobs if self.params(knobs) is not None else None

    def canonical(self, knobs: dict[str, str]) -> tuple:
        """One identity per configuration (``32`` and ``32.0`` of an ordered choice are one)."""
        params = self.params(knobs)
        return tuple(sorted((params or knobs).items()))

    def every_point(self) -> Iterator[dict[str, str]]:
        """Every configuration of a space without continuous dimensions."""
        choices = [d for d in self.dims if isinstance(d, Choices)]
        for combo in itertools.product(*(d.values for d in choices)):
            yield {d.key: v for d, v in zip(choices, combo, strict=True)}

    def neighbours(self, knobs: dict[str, str]) -> list[dict[str, str]]:
        """The configurations one step away from ``knobs``: the next ordered choice up or down,
        or another category, in one dimension at a time (intervals are left to the sampler)."""
        out: list[dict[str, str]] = []
        for d in self.dims:
            if not isinstance(d, Choices) or d.key not in knobs:
                continue
            if d.ordered:
                i = d.param(knobs[d.key])
                if not isinstance(i, int):  # not one of the choices (None)
                    continue
                steps = [d.by_value[j] for j in (i - 1, i + 1) if 0 <= j < len(d.values)]
            else:
                steps = [v for v in d.values if v != knobs[d.key]]
            out.extend({**knobs, d.key: v} for v in steps)
        return out

    def first(self) -> dict[str, str]:
        """The first choice of each dimension (an interval's low end): planning checks it."""
        return {
            d.key: (d.values[0] if isinstance(d, Choices) else d.text(d.low)) for d in self.dims
        }

    def describe(self) -> list[str]:
        return [f"{d.key}={d.describe()}" for d in self.dims]


def make_space(overrides: list[Override]) -> Space:
    """Hydra's parsed overrides → the space; ``repeat`` cannot be a dimension."""
    from hydra.core.override_parser.types import IntervalSweep

    fixed: list[str] = []
    dims: list[Dimension] = []
    order: list[str] = []
    for o in overrides:
        key = o.get_key_element()
        order.append(key)
        if not o.is_sweep_override():
            fixed.append(f"{key}={o.get_value_element_as_str()}")
            continue
        if key == "repeat":
            raise ConfigError(
                f"repeat={_written(o)}: a search measures each configuration "
                "once (allowed: one repeat value; hydra.sweeper.confirm=N re-measures the best)"
            )
        value = o.value()
        if isinstance(value, IntervalSweep):
            dims.append(_interval(key, o, value))
        else:
            values = tuple(dict.fromkeys(o.sweep_string_iterator()))
            dims.append(Choices(key, values))
    return Space(fixed=fixed, dims=dims, order=order)


def _written(o: Override) -> str:
    """The value of an override as it was written (``interval(100,400)``)."""
    line = str(getattr(o, "input_line", None) or "")
    return line.split("=", 1)[1] if "=" in line else line


def _interval(key: str, o: Override, value: IntervalSweep) -> Interval:
    text = _written(o)
    inner = text[text.rfind("(") + 1 : text.find(")")] if "(" in text else ""
    ends = [e.strip() for e in inner.split(",")]
    assert value.start is not None and value.end is not None  # Hydra's interval() has both
    low, high = float(value.start), float(value.end)
    if not low < high:
        raise ConfigError(f"{key}={text}: the interval's low end must be below its high end")
    log = "log" in (value.tags or set())
    if log and low <= 0:
        raise ConfigError(f"{key}={text}: a log interval must start above 0")
    whole = len(ends) == 2 and all(_WHOLE.match(e) for e in ends)
    return Interval(key=key, low=low, high=high, log=log, whole=whole)
