"""The search itself: Optuna's ask/tell loop over a space, judged by measured figures.

``Search`` knows nothing of Hydra or of how a trial runs: it proposes knobs (``ask``), is told
what a trial measured (``tell``, or ``resume`` for a trial found finished), and keeps every trial's
record. The sweeper (``llem.sweep.search_sweeper``) runs real trials through it; tests and
``bench/search.py`` run a planted function of the knobs through the same code.

How figures become the sampler's feedback (the judging itself: ``llem.sweep.search_verdict``):
- a trial with the objective is told its value, with one constraint value per declared constraint
  (``Constraint.violation``: <= 0 met); a constrained figure the trial lacks counts as a large
  violation, so the trial is infeasible with the reason and the sampler learns to avoid it;
- a trial without the objective (failed, skipped, energy unavailable) is told as failed: the
  sampler does not model it, and it is never run again;
- a trial whose run does not count (``discount``: its run did not end ok, or its energy is not
  valid where the objective or a constraint is on energy) is infeasible with that reason, its
  figures kept in the record, and the sampler is told it failed: no figure of it is learnt.

A proposal of a configuration already measured is not run again: the sampler is told the same
outcome and asked again (``repeated_proposals`` counts these). Where the sampler keeps proposing
measured configurations of a finite space, an untried one is taken at random (seeded); the search
stops when every configuration of the space has been measured.
"""

from __future__ import annotations

import logging
import random
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from llem.errors import ConfigError
from llem.sweep.search_confirm import (
    MAX_CANDIDATES,
    Standing,
    best_standing,
    confirm_overrides,
    standings,
)
from llem.sweep.search_file import SearchRecord, TrialRecord
from llem.sweep.search_space import Space
from llem.sweep.search_spec import SearchSpec
from llem.sweep.search_verdict import Verdict

if TYPE_CHECKING:
    from types import ModuleType

    from optuna.samplers import BaseSampler
    from optuna.trial import Trial

log = logging.getLogger("llem.sweep")

# Proposals of measured configurations in a row before an untried one is taken at random. TPE's
# proposals cost microseconds; each GP proposal refits its model to every trial told so far (each
# repeat is told too), so a GP search that has run out of neighbours would spend minutes repeating.
MAX_REPEATED = {"tpe": 100, "random": 100, "gp": 3}


def startup_trials(budget: int) -> int:
    """The random start: a third of the budget, 3 to 10 trials."""
    return max(3, min(10, budget // 3))


def make_sampler(spec: SearchSpec, budget: int) -> BaseSampler:
    """Optuna's sampler for ``spec.sampler``, seeded, with its random start
    (``startup_trials``)."""
    import optuna

    startup = startup_trials(budget)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # multivariate TPE is marked experimental
        if spec.sampler == "random":
            return optuna.samplers.RandomSampler(seed=spec.seed)
        if spec.sampler == "gp":
            try:
                import scipy  # noqa: F401  (Optuna's GP sampler needs it)
            except ImportError:
                raise ConfigError(
                    "hydra.sweeper.sampler=gp: needs scipy, which is not installed "
                    "(allowed here: tpe, random; or pip install scipy)"
                ) from None
            return optuna.samplers.GPSampler(seed=spec.seed, n_startup_trials=startup)
        return optuna.samplers.TPESampler(
            seed=spec.seed,
            n_startup_trials=startup,
            multivariate=True,
        )


def import_optuna() -> ModuleType:
    try:
        import optuna
    except ImportError:
        raise ConfigError(
            "hydra/sweeper=llem_search: needs optuna, which is not installed (allowed: "
            "pip install 'llem[search]', or hydra/sweeper=llem for the whole grid)"
        ) from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


@dataclass
class Proposal:
    knobs: dict[str, str]
    trial: Trial | None  # Optuna's trial (None for a confirmation or a resumed trial)
    kind: str = "search"
    confirmation: int = 0  # a confirmation: its number for this configuration (1, 2, ...)


@dataclass
class Search:
    spec: SearchSpec
    space: Space
    confirm: int = 0
    # the searched traffic.seed where the traffic draws send times from it (None: it does not);
    # confirmations run with the next seeds (llem.sweep.search_confirm)
    traffic_seed: int | None = None
    record: SearchRecord = field(init=False)
    _measured: dict[tuple, Verdict] = field(default_factory=dict, init=False)
    _in_flight: set[tuple] = field(default_factory=set, init=False)
    _confirming: dict[tuple, int] = field(default_factory=dict, init=False)  # in flight
    _sampler_spent: bool = field(default=False, init=False)  # proposes only measured points

    def __post_init__(self) -> None:
        optuna = import_optuna()
        self._optuna = optuna
        self.study = optuna.create_study(
            direction=self.spec.direction, sampler=make_sampler(self.spec, self.spec.budget)
        )
        self._rng = random.Random(self.spec.seed)
        self.record = SearchRecord(
            objective=self.spec.objective,
            direction=self.spec.direction,
            constraints=[c.text for c in self.spec.constraints],
            budget=self.spec.budget,
            seed=self.spec.seed,
            sampler=self.spec.sampler,
            space=self.space.describe(),
            fixed=list(self.space.fixed),
            space_size=self.space.size,
            confirm=self.confirm,
        )

    # ------------------------------------------------------------------ bookkeeping
    @property
    def searched(self) -> int:
        """Search trials so far (confirmations are not counted against the budget)."""
        return sum(1 for t in self.record.trials if t.kind == "search")

    def _exhausted(self) -> bool:
        size = self.space.size
        return size is not None and len(self._measured) + len(self._in_flight) >= size

    def stop_reason(self) -> str | None:
        """Why no further search trial runs (None: the search goes on)."""
        if self.searched + len(self._in_flight) >= self.spec.budget:
            return f"the budget of {self.spec.budget} trials was spent"
        if self._exhausted():
            return f"every configuration of the space ({self.space.size}) was measured"
        if self._sampler_spent:
            return "the sampler proposed no configuration that was not measured"
        return None

    def _tell_sampler(self, trial: Trial, verdict: Verdict) -> None:
        states = self._optuna.trial.TrialState
        if not verdict.counts:
            self.study.tell(trial, state=states.FAIL)
            return
        for name, value in verdict.violations.items():
            trial.set_constraint(name, value)
        self.study.tell(trial, verdict.objective)

    def _keep(self, record: TrialRecord) -> TrialRecord:
        self.record.trials.append(record)
        self._update_best()
        return record

    def standings(self) -> list[Standing]:
        """Every configuration measured, with all its runs."""
        return standings(self.space, self.record.trials)

    def _update_best(self) -> None:
        """The best on every run of each configuration (``llem.sweep.search_confirm``)."""
        ranked = self.standings()
        best = best_standing(self.spec, ranked)
        self.record.best = best.first.number if best is not None else None
        self.record.best_mean = best.mean if best is not None else None
        self.record.best_runs = len(best.runs) if best is not None else 0
        self.record.demoted = {
            s.first.dir: why for s in ranked if (why := s.demotion()) is not None
        }

    def _trial_record(
        self, number: int, directory: str, proposal: Proposal, verdict: Verdict, **extra: Any
    ) -> TrialRecord:
        return TrialRecord(
            number=number,
            dir=directory,
            kind=proposal.kind,
            knobs=dict(proposal.knobs),
            overrides=self.trial_overrides(proposal),
            status=extra.pop("status", "ok"),
            objective=verdict.objective,
            constraints=dict(verdict.constraints),
            feasible=verdict.feasible,
            why_not=verdict.why_not,
            discounted=verdict.discounted,
            note=verdict.note,
            **extra,
        )

    def trial_overrides(self, proposal: Proposal) -> list[str]:
        if proposal.kind == "confirm":
            return confirm_overrides(
                self.space, proposal.knobs, proposal.confirmation, self.traffic_seed
            )
        return self.space.overrides(proposal.knobs)

    # ------------------------------------------------------------------ the loop
    def resume(self, directory: str, knobs: dict[str, str], verdict: Verdict, **extra: Any) -> None:
        """A trial found finished in the sweep directory: the sampler is told, nothing runs."""
        kind = extra.pop("kind", "search")
        key = self.space.canonical(knobs)
        if kind == "search":
            params = self.space.params(knobs)
            states = self._optuna.trial.TrialState
            frozen = self._optuna.trial.create_trial(
                state=states.COMPLETE if verdict.counts else states.FAIL,
                value=verdict.objective if verdict.counts else None,
                params=params,
                distributions=self.space.distributions(),
                constraints=dict(verdict.violations) if verdict.counts else None,
            )
            self.study.add_trial(frozen)
            self._measured[key] = verdict
        proposal = Proposal(knobs=knobs, trial=None, kind=kind)
        number = len(self.record.trials)
        self._keep(self._trial_record(number, directory, proposal, verdict, resumed=True, **extra))

    def ask(self) -> Proposal | None:
        """The next configuration to measure; None when the search is over (``stop_reason``)."""
        if self.stop_reason() is not None:
            return self._confirmation()
        local = self._neighbour()
        if local is not None:
            return local
        for _ in range(MAX_REPEATED[self.spec.sampler]):
            trial = self.study.ask()
            knobs = self.space.suggest(trial)
            key = self.space.canonical(knobs)
            if key in self._in_flight:
                self.study.tell(trial, state=self._optuna.trial.TrialState.FAIL)
                continue
            if key in self._measured:
                self._tell_sampler(trial, self._measured[key])
                self.record.repeated_proposals += 1
                continue
            self._in_flight.add(key)
            return Proposal(knobs=knobs, trial=trial)
        return self._untried()

    def _neighbour(self) -> Proposal | None:
        """After the random start, an untried neighbour of the best feasible trial while it has
        one (the sampler proposes otherwise), so that the search walks along the constraint's
        edge to the optimum."""
        if self.searched < startup_trials(self.spec.budget) or self.spec.sampler == "random":
            return None
        best = self.record.best_trial()
        if best is None:
            return None
        taken = set(self._measured) | self._in_flight
        options = [k for k in self.space.neighbours(best.knobs)]
        options = [k for k in options if self.space.canonical(k) not in taken]
        if not options:
            return None
        return self._enqueued(self._rng.choice(options))

    def _enqueued(self, knobs: dict[str, str]) -> Proposal:
        """``knobs`` as the sampler's next trial (it keeps every trial it is told)."""
        self.study.enqueue_trial(self.space.params(knobs))
        trial = self.study.ask()
        knobs = self.space.suggest(trial)
        self._in_flight.add(self.space.canonical(knobs))
        return Proposal(knobs=knobs, trial=trial)

    def _untried(self) -> Proposal | None:
        """An untried configuration of a finite space, at random; None in a continuous one."""
        if self.space.size is None:
            log.warning(
                "the sampler proposed only measured configurations %d times",
                MAX_REPEATED[self.spec.sampler],
            )
            self._sampler_spent = True
            return self._confirmation()
        taken = set(self._measured) | self._in_flight
        untried = [k for k in self.space.every_point() if self.space.canonical(k) not in taken]
        if not untried:
            return self._confirmation()
        return self._enqueued(self._rng.choice(untried))

    def _confirmation(self) -> Proposal | None:
        """After the search: the best configuration again until it has ``confirm``
        confirmations; one that a confirmation demotes gives way to the next best."""
        if self._in_flight or self.confirm <= 0:
            return None  # the best is chosen once every search trial is told
        best = best_standing(self.spec, self.standings())
        if best is None:
            return None
        key = self.space.canonical(best.first.knobs)
        done = best.confirmations + self._confirming.get(key, 0)
        if done >= self.confirm:
            return None
        ran = len(self.record.confirmations()) + sum(self._confirming.values())
        if ran >= self.confirm * MAX_CANDIDATES:
            self.record.unconfirmed = (
                f"the best, #{best.first.dir}, has {best.confirmations} of {self.confirm} "
                f"confirmations: {ran} confirmations ran ({MAX_CANDIDATES} candidates' worth)"
            )
            return None
        self._confirming[key] = self._confirming.get(key, 0) + 1
        return Proposal(dict(best.first.knobs), None, kind="confirm", confirmation=done + 1)

    def _confirmed(self, proposal: Proposal) -> None:
        """A confirmation told or abandoned: no longer in flight."""
        key = self.space.canonical(proposal.knobs)
        left = self._confirming.get(key, 0) - 1
        if left > 0:
            self._confirming[key] = left
        else:
            self._confirming.pop(key, None)

    def tell(
        self, proposal: Proposal, directory: str, verdict: Verdict, **extra: Any
    ) -> TrialRecord:
        """What ``proposal``'s trial measured: the sampler learns it and the record keeps it."""
        number = len(self.record.trials)
        record = self._trial_record(number, directory, proposal, verdict, **extra)
        if proposal.kind == "search":
            key = self.space.canonical(proposal.knobs)
            self._in_flight.discard(key)
            self._measured[key] = verdict
            assert proposal.trial is not None  # a search proposal is the sampler's (``ask``)
            self._tell_sampler(proposal.trial, verdict)
        else:
            self._confirmed(proposal)
        return self._keep(record)

    def abandon(self, proposal: Proposal) -> None:
        """A proposal that will not be measured (interrupted): the sampler forgets it."""
        if proposal.trial is not None:
            self._in_flight.discard(self.space.canonical(proposal.knobs))
            self.study.tell(proposal.trial, state=self._optuna.trial.TrialState.FAIL)
        elif proposal.kind == "confirm":
            self._confirmed(proposal)
