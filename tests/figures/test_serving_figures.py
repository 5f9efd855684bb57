"""llem.figures.serving and llem.figures.steady_state on synthetic timelines, against figures and
windows computed by hand."""

from __future__ import annotations

import pytest

from llem.figures.serving import (
    Slo,
    concurrency,
    finished_between,
    goodput,
    latency_figures,
    pacing_lateness_ms,
    request_figures,
    request_records,
    slo_met,
    tokens_between,
)
from llem.figures.steady_state import STATIC_REASON, SteadyRule, below, steady_state
from llem.figures.timelines import timelines_from_batches
from llem.vocabulary.workload import BatchOutput, RequestTimeline


def tl(
    rid: int,
    sent: float,
    times: list[float],
    tokens: list[int] | None = None,
    arrival: float | None = None,
    scheduled: float | None = None,
) -> RequestTimeline:
    return RequestTimeline(
        request_id=rid,
        prompt_index=rid,
        arrival_s=sent if arrival is None else arrival,
        scheduled_s=scheduled,
        sent_s=sent,
        chunk_times_s=times,
        chunk_tokens=tokens or [1] * len(times),
        input_tokens=5,
    )


def test_request_latency_by_the_issues_definitions() -> None:
    # arrival 10.0 (scheduled), sent 10.1; chunks at 10.5 (1 token), 10.8 (3 tokens), 11.0 (1)
    t = tl(0, 10.1, [10.5, 10.8, 11.0], [1, 3, 1], arrival=10.0, scheduled=10.0)
    f = request_figures(t)
    assert f.output_tokens == 5
    assert f.ttft_s == pytest.approx(0.4)  # 10.5 - 10.1 (the send, as vLLM bench serve)
    assert f.e2e_s == pytest.approx(0.9)  # 11.0 - 10.1
    assert f.tpot_s == pytest.approx((0.9 - 0.4) / (5 - 1))  # 0.125
    assert f.ttft_from_schedule_s == pytest.approx(0.5)  # 10.5 - 10.0 (the schedule)
    assert f.e2e_from_schedule_s == pytest.approx(1.0)
    # one ITL per chunk after the first (vLLM), and llem's spread: 0.3 s / 3 tokens, 0.2 s / 1
    assert f.itl_s == pytest.approx((0.3, 0.2))
    assert f.itl_per_token_s == pytest.approx((0.1, 0.1, 0.1, 0.2))


def test_one_token_request_has_no_tpot_and_no_itl() -> None:
    f = request_figures(tl(0, 0.0, [0.25]))
    assert (f.ttft_s, f.e2e_s, f.tpot_s, f.itl_s) == (0.25, 0.25, None, ())


def test_latency_percentiles_over_requests() -> None:
    figs = [request_figures(tl(i, 0.0, [0.1 * (i + 1), 0.1 * (i + 1) + 0.05])) for i in range(3)]
    lat = latency_figures(figs)
    # TTFTs 100, 200, 300 ms: p50 = 200, p90 = 200 + 0.8 x 100 = 280
    assert lat.ttft_ms == pytest.approx({"p50": 200.0, "p90": 280.0, "p99": 298.0})
    assert lat.tpot_ms == pytest.approx({"p50": 50.0, "p90": 50.0, "p99": 50.0})
    assert lat.e2e_ms is not None and lat.e2e_ms["p50"] == pytest.approx(250.0)


def test_pacing_lateness_is_send_minus_schedule() -> None:
    ts = [
        tl(i, s + late, [s + 1.0], scheduled=s)
        for i, (s, late) in enumerate([(0.0, 0.001), (0.5, 0.002), (1.0, 0.010)])
    ]
    late = pacing_lateness_ms(ts)
    assert late is not None
    assert late["p50"] == pytest.approx(2.0) and late["max"] == pytest.approx(10.0)
    assert late["p99"] == pytest.approx(2.0 + 0.98 * 8.0)
    assert pacing_lateness_ms([tl(0, 0.0, [1.0])]) is None  # closed loop: nothing scheduled


def test_concurrency_is_time_weighted_over_the_span() -> None:
    # A in flight 0..4, B 1..3, C 2..6; over [0, 4]: A 4 s + B 2 s + C 2 s = 8 s -> mean 2
    ts = [tl(0, 0.0, [4.0]), tl(1, 1.0, [3.0]), tl(2, 2.0, [6.0])]
    c = concurrency(ts, 0.0, 4.0)
    assert c is not None and c.mean == pytest.approx(2.0) and c.max == 3
    # over [3, 6]: A 1 s, B 0 s (finishes at 3), C 3 s -> 4 / 3; at most A and C
    c = concurrency(ts, 3.0, 6.0)
    assert c is not None and c.mean == pytest.approx(4 / 3) and c.max == 2
    assert concurrency(ts, 1.0, 1.0) is None


def _wave(n: int, b: int, decode_s: float = 1.0, first_s: float = 0.1) -> list[RequestTimeline]:
    """n requests all sent at 0 to an engine that runs b at a time: request i starts in wave
    i // b at wave x decode_s, has its first token first_s later and finishes decode_s after it
    started."""
    out = []
    for i in range(n):
        start = (i // b) * decode_s
        out.append(tl(i, 0.0, [start + first_s, start + decode_s], arrival=0.0, scheduled=0.0))
    return out


def test_mlenergy_rule_edges_by_hand() -> None:
    # N = 9, B = 2: waves start at 0, 1, 2, 3, 4 (the last has one request).
    # Start: the 2nd first token -> 0.1 (both of wave 0). End: the (9 - 2 - 1) = 6th finish;
    # finishes 1, 1, 2, 2, 3, 3, 4, 4, 5 -> the 6th is 3.0.
    rule = SteadyRule(open_loop=False, max_batch=2)
    s = steady_state(_wave(9, 2), rule, origin_s=0.0)
    assert (s.start_s, s.end_s, s.null_reason) == (pytest.approx(0.1), pytest.approx(3.0), None)
    # in flight over [0.1, 3.0]: always 2 (a wave's two finish as the next two are sent... here
    # every request is "sent" at 0, so all 9 are in flight until they finish):
    # finishes at 1 (2), 2 (2), 3 (2): count 9 on [0.1,1), 7 on [1,2), 5 on [2,3)
    expected = (9 * 0.9 + 7 * 1.0 + 5 * 1.0) / 2.9
    assert s.mean_concurrency == pytest.approx(expected)


def test_queued_requests_are_in_flight_but_not_running() -> None:
    """Offline traffic sends all 9 at 0 to an engine running 2 at a time: 9 are in flight at the
    start, but the running batch (first token .. finish) is never above 2; the steady state's
    concurrency check reads the running batch, so a batch of 4 that never filled fails it."""
    ts = _wave(9, 2)
    c = concurrency(ts, 0.1, 3.0)
    assert c is not None and c.max == 9 and c.running_max == 2
    # running over [0.1, 3.0]: wave 0 on [0.1, 1), then each wave 0.9 s of each second at 2
    assert c.running_mean == pytest.approx((2 * 0.9 + 2 * 0.9 + 2 * 0.9) / 2.9)
    s = steady_state(ts, SteadyRule(open_loop=False, max_batch=2), origin_s=0.0)
    assert s.mean_running == pytest.approx(c.running_mean)
    floor = SteadyRule(open_loop=False, max_batch=2, min_concurrency=0.95)
    assert steady_state(ts, floor, 0.0).null_reason is not None  # 1.86 < 1.9
    assert steady_state(ts, SteadyRule(False, 2, min_concurrency=0.9), 0.0).null_reason is None


def test_mlenergy_rule_needs_2b_plus_1_requests() -> None:
    s = steady_state(_wave(8, 4), SteadyRule(open_loop=False, max_batch=4), origin_s=0.0)
    assert s.start_s is None and s.null_reason is not None
    assert "too few requests: 8 < 2 x 4 + 1" in s.null_reason


def test_too_short_and_too_thin_steady_states_are_none_with_the_reason() -> None:
    short = steady_state(
        _wave(9, 2), SteadyRule(open_loop=False, max_batch=2, min_s=5.0), origin_s=0.0
    )
    assert short.null_reason is not None and "lasts 2.900 s < measurement.min_steady_state_s=5" in (
        short.null_reason
    )
    assert "traffic.duration_s" not in short.null_reason  # a batch rule: more requests, not time
    sent = [tl(i, 0.1 * i, [0.1 * i + 0.05, 0.1 * i + 0.2]) for i in range(20)]
    open_loop = SteadyRule(open_loop=True, max_batch=2, min_s=5.0)
    hint = steady_state(sent, open_loop, origin_s=0.0).null_reason
    assert hint is not None and "traffic.duration_s or traffic.n_requests" in hint
    # closed loop with 2 slots (sent when one finishes), B = 4 configured: mean 2 < 0.85 x 4
    ts = [tl(i, (i // 2) * 1.0, [(i // 2) + 0.1, (i // 2) + 1.0]) for i in range(20)]
    thin = steady_state(
        ts, SteadyRule(open_loop=False, max_batch=4, min_concurrency=0.85), origin_s=0.0
    )
    # running (first token .. finish): 2 for 0.9 s of every second -> 1.8 < 3.4
    assert thin.null_reason is not None and "mean running batch 1.8" in thin.null_reason


def test_open_loop_edges_by_hand() -> None:
    # arrivals every 0.5 s from 0 (10 requests), each takes 1.2 s: finishes 1.2, 1.7, ..., 5.7
    ts = [tl(i, 0.5 * i, [0.5 * i + 0.2, 0.5 * i + 1.2], scheduled=0.5 * i) for i in range(10)]
    rule = SteadyRule(open_loop=True, max_batch=64, warmup_requests=2, cooldown_requests=3)
    s = steady_state(ts, rule, origin_s=0.0)
    # start: the 2nd finish = 1.7; end: the first of the last 3 arrivals (7th, 0-based 7) = 3.5
    assert (s.start_s, s.end_s) == (pytest.approx(1.7), pytest.approx(3.5))
    # open loop is not judged by concurrency (64 would fail it)
    assert s.null_reason is None
    none = steady_state(ts, SteadyRule(open_loop=True, max_batch=1, warmup_requests=0), 0.0)
    assert (none.start_s, none.end_s) == (0.0, pytest.approx(5.7))  # origin .. last finish
    few = steady_state(ts, SteadyRule(True, 1, warmup_requests=6, cooldown_requests=4), 0.0)
    assert few.null_reason is not None and "too few requests: 10 <=" in few.null_reason


def test_tokens_and_requests_inside_a_span() -> None:
    ts = [tl(0, 0.0, [0.5, 1.5, 2.5], [1, 2, 1]), tl(1, 0.0, [1.0, 3.5])]
    assert tokens_between(ts, 1.0, 3.0) == 2 + 1 + 1  # chunks at 1.5 (2), 2.5 (1), 1.0 (1)
    assert finished_between(ts, 1.0, 3.0) == 1  # only request 0 ends (2.5) inside


def test_goodput_against_hand_computed_cases() -> None:
    figs = [
        request_figures(tl(0, 0.0, [0.05, 0.15, 0.25])),  # ttft 50, tpot 100, e2e 250
        request_figures(tl(1, 0.0, [0.30, 0.35])),  # ttft 300: misses ttft 200
        request_figures(tl(2, 0.0, [0.10])),  # 1 token: no tpot, meets
        request_figures(tl(3, 0.0, [0.05, 0.30])),  # tpot 250: misses tpot 200
    ]
    slo = Slo(ttft_ms=200, tpot_ms=200)
    assert [slo_met(f, slo) for f in figs] == [True, False, True, False]
    g = goodput(figs, slo, window_s=2.0)
    assert g is not None
    assert (g.requests_met, g.fraction) == (2, 0.5)
    assert g.requests_per_s == pytest.approx(1.0)
    assert g.good_output_tokens == 4 and g.output_tokens_per_s == pytest.approx(2.0)
    assert slo_met(figs[0], Slo()) is None and goodput(figs, Slo(), 2.0) is None
    assert slo_met(figs[0], Slo(e2e_ms=200)) is False


def test_records_are_relative_to_the_window_start() -> None:
    t = tl(7, 100.2, [100.5, 100.7], arrival=100.1, scheduled=100.1)
    (r,) = request_records([t], window_start_s=100.0, slo=Slo(ttft_ms=500))
    assert (r.request_id, r.scheduled_s, r.sent_s, r.first_token_s, r.finish_s) == (
        7,
        pytest.approx(0.1),
        pytest.approx(0.2),
        pytest.approx(0.5),
        pytest.approx(0.7),
    )
    # TTFT and e2e from the actual send (100.2); from the scheduled send (100.1) on their own
    assert (r.ttft_ms, r.tpot_ms, r.e2e_ms, r.slo_met) == (
        pytest.approx(300.0),
        pytest.approx(200.0),
        pytest.approx(500.0),
        True,
    )
    assert r.ttft_from_schedule_ms == pytest.approx(400.0)


def test_static_batches_become_timelines_from_the_batch_start() -> None:
    # two requests, steps at 1.1, 1.2 (adds 2 tokens: prompt lookup), 1.3; request 0 stops at 2
    # tokens (EOS inside the 2-token step), request 1 runs all 4
    b = BatchOutput(
        start_s=1.0,
        end_s=1.3,
        input_tokens=[3, 4],
        output_tokens=[2, 4],
        step_times_s=[1.1, 1.2, 1.3],
        step_tokens=[1, 2, 1],
    )
    t0, t1 = timelines_from_batches([b, b], n_prompts=3)[:2]
    assert (t0.arrival_s, t0.sent_s, t0.chunk_times_s, t0.chunk_tokens) == (
        1.0,
        1.0,
        [1.1, 1.2],
        [1, 1],
    )
    assert (t1.chunk_times_s, t1.chunk_tokens, t1.input_tokens) == ([1.1, 1.2, 1.3], [1, 2, 1], 4)
    all4 = timelines_from_batches([b, b], n_prompts=3)
    assert [t.request_id for t in all4] == [0, 1, 2, 3]
    assert [t.prompt_index for t in all4] == [0, 1, 2, 0]  # the prompts cycle
    # per-request timelines (vLLM offline) are taken as they are
    v = BatchOutput(
        1.0,
        2.0,
        [3],
        [2],
        [1.5, 2.0],
        [1, 1],
        request_step_times_s=[[1.4, 1.9]],
        request_step_tokens=[[1, 1]],
    )
    (tv,) = timelines_from_batches([v], n_prompts=1)
    assert tv.chunk_times_s == [1.4, 1.9] and request_figures(tv).ttft_s == pytest.approx(0.4)


def test_static_batches_get_no_steady_state_and_no_condition() -> None:
    """Static batches fill and drain: no steady state is meant, so none is judged (a full one
    would pass ML.ENERGY's rule here, 9 requests at B = 2)."""
    ts = _wave(9, 2)
    judged = steady_state(ts, SteadyRule(open_loop=False, max_batch=2), origin_s=0.0)
    assert judged.start_s is not None and judged.judged
    static = steady_state(
        ts, SteadyRule(open_loop=False, max_batch=2, static_batches=True), origin_s=0.0
    )
    assert static.start_s is None and not static.judged
    assert static.null_reason == STATIC_REASON


def test_a_running_batch_just_under_its_floor_never_reads_as_equal_to_it() -> None:
    """At B = 1 a running batch of 0.8493 under the floor 0.85 x 1 was written 0.85 < 0.85."""
    assert below(0.8493, 0.85) == ("0.849", "0.850")
    assert below(1.8, 3.4) == ("1.80", "3.40")
    # B = 1, steady state [0.1, 1.95]: running 0.9 + 0.8562 s of 1.85 s = 0.9493 < 0.95 x 1
    ts = [tl(0, 0.0, [0.1, 1.0]), tl(1, 1.0, [1.0938, 1.95])]
    ts += [tl(2, 1.95, [2.0, 3.0]), tl(3, 3.0, [3.1, 4.0])]
    s = steady_state(ts, SteadyRule(open_loop=False, max_batch=1, min_concurrency=0.95), 0.0)
    assert s.null_reason is not None
    number = s.null_reason.split("mean running batch ")[1].split(" <")[0]
    floor = s.null_reason.rsplit("= ", 1)[1]
    assert float(number) < float(floor) and number != floor
