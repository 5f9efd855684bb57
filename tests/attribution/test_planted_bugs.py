"""The attribution against a truth planted in the power itself: a replayed trace whose every
engine step draws ``a x prefill tokens + b x decode tokens + P_static x seconds`` and whose gaps
draw ``P_between``, under a chunked-prefill schedule (prompt chunks beside decodes in one step).
The truth is this file's own arithmetic of those planted costs; no figure of llem's builds it.

Each bug these tests are written against passed the tests before them:

* prefill's and decode's costs swapped in the split (a mixed step's prefill part costs ``b`` per
  token): the phases and each request's prefill and decode energy move;
* the steps' times read 150 ms late (each step's energy read off the trace 150 ms after it ran):
  the fitted costs, the phases and the requests move;
* a prefill token counted as half (in the fit, the split or the token count): the fitted cost
  per prefill token, the split or the count moves.

The step durations are ``t0 + c x tokens``, so a step's static power shared by token share or by
the time each part keeps the step busy is the same figure: the truth does not depend on which a
model uses."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from llem.config.schema import EnergySource
from llem.figures.attribution import Attribution, attribute, spans
from llem.figures.bins import Bins, group
from llem.runner.attribution import attribute_window
from llem.vocabulary.workload import EngineStep, StepShare
from tests.measure.conftest import make_cfg

A, B, P, P_GAP = 0.004, 0.05, 120.0, 60.0  # J/prefill token, J/decode token, W in steps, W between
T0, C = 0.008, 4e-5  # a step lasts T0 + C x its tokens (s)
BUDGET = 512  # tokens per step: longer prompts are prefilled in chunks beside the decodes
PROMPTS = [700, 300, 1200, 150, 900, 400, 600, 250]
OUTPUTS = [20, 35, 12, 40, 18, 25, 30, 15]
ARRIVALS = [0.0, 0.05, 0.12, 0.3, 0.42, 0.6, 0.65, 0.9]  # s after the first step
LEAD_S = 0.5  # trace seconds before the first step and after the last


@dataclass(frozen=True)
class Planted:
    steps: list[EngineStep]  # on trace time


def _schedule() -> Planted:
    """Requests arrive, each running one decodes a token per step, and the waiting prompts are
    prefilled in chunks within what the budget leaves (the first token of a request comes with
    its last chunk, as an engine's does); a 1 ms gap after each step, idle time where none runs."""
    left = dict(enumerate(PROMPTS))  # prompt tokens still to prefill
    todo = {i: n - 1 for i, n in enumerate(OUTPUTS)}  # tokens to decode after the first
    running: list[int] = []
    steps, t = [], 0.0
    while left or any(todo[i] for i in running):
        waiting = [i for i in left if ARRIVALS[i] <= t + 1e-12]
        decodes = [i for i in running if todo[i] > 0]
        if not waiting and not decodes:
            t = min(ARRIVALS[i] for i in left)
            continue
        shares = [StepShare(i, 0, 1) for i in decodes]
        room = BUDGET - len(decodes)
        for i in waiting:
            chunk = min(room, left[i])
            if chunk <= 0:
                break
            shares.append(StepShare(i, chunk, 0))
            room -= chunk
            left[i] -= chunk
            if left[i] == 0:
                del left[i]
                running.append(i)
        for i in decodes:
            todo[i] -= 1
        n = sum(s.prefill_tokens + s.decode_tokens for s in shares)
        d = T0 + C * n
        steps.append(EngineStep.of_shares(LEAD_S + t, LEAD_S + t + d, shares))
        t += d + 0.001
    return Planted(steps)


def _step_j(s: EngineStep) -> float:
    d = s.end_s - (s.start_s or 0.0)
    return A * (s.prefill_tokens or 0) + B * (s.decode_tokens or 0) + P * d


def _trace(planted: Planted) -> str:
    """Constant power over each step and each gap (a vertical step between them)."""
    rows, edge = [(0.0, P_GAP)], 0.0
    for s in planted.steps:
        start = s.start_s or 0.0
        rows += [(edge, P_GAP), (start, P_GAP)]
        w = _step_j(s) / (s.end_s - start)
        rows += [(start, w), (s.end_s, w)]
        edge = s.end_s
    rows += [(edge, P_GAP), (edge + 2 * LEAD_S, P_GAP)]
    return "time_s,device,power_w\n" + "".join(f"{t!r},g,{w!r}\n" for t, w in rows)


@dataclass(frozen=True)
class Truth:
    prefill_j: float
    decode_j: float
    between_j: float
    request_j: dict[int, tuple[float, float]]  # id -> (prefill J, decode J)


BY_TIME = 0.5  # the sharing convention: half of a step by its parts' costs, half by time alone


def _truth(planted: Planted, window_s: float) -> Truth:
    """Each request's part of each step by the sharing convention: half its tokens' planted
    costs and its share of the step's static power by the tokens it computed there (= by the
    time its tokens kept the step busy: ``t0 + c x N``), half its share of the whole step's
    energy by that time alone; ``P_between`` over the window's seconds outside the steps."""
    req: dict[int, tuple[float, float]] = {}
    for s in planted.steps:
        n = (s.prefill_tokens or 0) + (s.decode_tokens or 0)
        static = P * (s.end_s - (s.start_s or 0.0))
        whole = _step_j(s)
        for x in s.shares or ():
            pre, dec = req.get(x.request_id, (0.0, 0.0))
            by_cost = A * x.prefill_tokens + static * x.prefill_tokens / n
            pre += (1 - BY_TIME) * by_cost + BY_TIME * whole * x.prefill_tokens / n
            by_cost = B * x.decode_tokens + static * x.decode_tokens / n
            dec += (1 - BY_TIME) * by_cost + BY_TIME * whole * x.decode_tokens / n
            req[x.request_id] = (pre, dec)
    prefill = sum(p for p, _ in req.values())
    decode = sum(d for _, d in req.values())
    busy = sum(s.end_s - (s.start_s or 0.0) for s in planted.steps)
    return Truth(prefill, decode, P_GAP * (window_s - busy), req)


@pytest.fixture
def attributed(tmp_path, make_session, clock):
    """The schedule's steps and the attribution over the whole window of its replayed trace."""
    planted = _schedule()
    trace = tmp_path / "trace.csv"
    trace.write_text(_trace(planted))
    cfg = make_cfg(energy=EnergySource.replay, replay_trace=str(trace))
    session = make_session(cfg, indices=None)
    session.start()
    origin = session.source.origin_s
    with session.window():
        clock.sleep(origin + planted.steps[-1].end_s + 2 * LEAD_S - clock.now())
    w = session.last_window
    assert w is not None and w.start_s <= origin + planted.steps[0].start_s - LEAD_S / 2
    steps = [
        EngineStep.of_shares(origin + (s.start_s or 0.0), origin + s.end_s, s.shares or ())
        for s in planted.steps
    ]
    got = attribute_window(steps, w, session.source, w.start_s, w.end_s)
    assert not isinstance(got, str), got
    return planted, w, got[1]


def test_the_schedule_prefills_long_prompts_in_chunks_beside_decodes() -> None:
    planted = _schedule()
    mixed = [s for s in planted.steps if s.prefill_tokens and s.decode_tokens]
    assert len(mixed) >= 10  # the steps a swapped split or a halved prefill token moves
    assert sum(s.prefill_tokens or 0 for s in planted.steps) == sum(PROMPTS)
    assert sum(s.decode_tokens or 0 for s in planted.steps) == sum(OUTPUTS) - len(OUTPUTS)
    assert all((s.prefill_tokens or 0) + (s.decode_tokens or 0) <= BUDGET for s in planted.steps)


def test_the_fitted_costs_and_the_token_counts_are_the_planted_ones(attributed) -> None:
    planted, _, att = attributed
    assert att.fit.a.value == pytest.approx(A, rel=1e-6)
    assert att.fit.b.value == pytest.approx(B, rel=1e-6)
    assert att.fit.p_static.value == pytest.approx(P, rel=1e-6)
    assert att.fit.p_between.value == pytest.approx(P_GAP, rel=1e-6)
    assert att.prefill_tokens == sum(PROMPTS)
    assert att.decode_tokens == sum(OUTPUTS) - len(OUTPUTS)


def _assert_phases(att: Attribution, truth: Truth) -> None:
    assert truth.prefill_j + truth.decode_j + truth.between_j == pytest.approx(att.total_j)
    assert att.prefill is not None and att.decode is not None and att.between is not None
    assert att.prefill.energy_j == pytest.approx(truth.prefill_j, rel=1e-6)
    assert att.decode.energy_j == pytest.approx(truth.decode_j, rel=1e-6)
    assert att.between.energy_j == pytest.approx(truth.between_j, rel=1e-6)


def _assert_requests(att: Attribution, truth: Truth) -> None:
    assert att.requests is not None and set(att.requests) == set(truth.request_j)
    for rid, (pre, dec) in truth.request_j.items():
        r = att.requests[rid]
        assert r.prefill_j == pytest.approx(pre, rel=1e-6), rid
        assert r.decode_j == pytest.approx(dec, rel=1e-6), rid
        assert r.energy_j == pytest.approx(pre + dec, rel=1e-6), rid


def test_the_phases_are_the_planted_energies_and_add_up_to_the_window(attributed) -> None:
    planted, w, att = attributed
    assert att.total_j == pytest.approx(w.devices[0].energy_j, rel=1e-9)
    _assert_phases(att, _truth(planted, w.end_s - w.start_s))


def test_each_requests_prefill_and_decode_energy_are_its_planted_costs(attributed) -> None:
    planted, w, att = attributed
    _assert_requests(att, _truth(planted, w.end_s - w.start_s))


def test_intervals_of_several_steps_are_shared_back_into_the_planted_steps() -> None:
    """A timeline too coarse for the steps: the spans grouped into intervals of 100 ms or more,
    each interval's energy the planted sum of its spans'. The model fitted over the intervals is
    the planted one, so sharing each interval by its spans' fitted costs gives every step, phase
    and request its planted energy back."""
    planted = _schedule()
    end = planted.steps[-1].end_s + LEAD_S
    cut = spans(planted.steps, 0.0, end)
    span_j = [P_GAP * (s.end_s - s.start_s) if s.step is None else _step_j(s.step) for s in cut]
    groups = group([s.end_s - s.start_s for s in cut], 0.1)
    assert max(hi - lo for lo, hi in groups) > 5  # intervals of several steps and gaps
    n = len(groups)
    energy = tuple(sum(span_j[lo:hi]) for lo, hi in groups)
    bins = Bins(tuple(groups), energy, (0.0,) * n, (0.0,) * (n + 1), 0.05)
    att = attribute(cut, span_j, [0.0] * len(cut), 0.0, bins)
    assert att.fit.a.value == pytest.approx(A, rel=1e-6)
    assert att.fit.b.value == pytest.approx(B, rel=1e-6)
    assert att.span_energy_j == pytest.approx(span_j, rel=1e-6)
    truth = _truth(planted, end)
    _assert_phases(att, truth)
    _assert_requests(att, truth)
