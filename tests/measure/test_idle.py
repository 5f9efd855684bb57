"""The idle baseline: measured once per process on an idle device, reused by later runs, re-measured
only after a cool-down; and recorded with when and how it was taken."""

from __future__ import annotations

import pytest

from llem.measure.idle import IdleCache
from llem.testing.fake_pynvml import FakeGpu, Step

from .conftest import make_cfg

T0 = 1000.0


def hot_after(t_s: float, idle_c: float = 35.0, hot_c: float = 75.0):
    return lambda t: idle_c if t < t_s else hot_c


def run_point(make_session, clock, cfg, window_s=2.0):
    """One sweep point: session start (idle baseline), load + warm-up, window, report."""
    s = make_session(cfg)
    s.start()
    clock.sleep(0.5)
    with s.window():
        clock.sleep(window_s)
    return s.measurement(output_tokens=100, requests=4, input_tokens=50)


def test_second_point_of_a_sweep_reuses_the_cold_baseline(install_nvml, make_session, clock):
    # 60 W and 35 C while really idle (until T0 + 3 s), then 250 W and 75 C: the GPU is busy and
    # hot from the first window on, as in a sweep where the next point starts right after.
    install_nvml(
        [FakeGpu("GPU-a", power=Step(60.0, 250.0, T0 + 3.0), temperature_c=hot_after(T0 + 3.0))]
    )
    cfg = make_cfg(idle_baseline_s=2.0)
    first = run_point(make_session, clock, cfg).energy
    assert first.idle_power_w == pytest.approx(60.0, abs=1e-2)
    assert first.idle_source == "measured_this_run"
    assert first.idle_age_s == 0.0 and first.idle_measured_at.endswith("+00:00")

    second = run_point(make_session, clock, cfg).energy  # today: re-measured hot, 250 W
    assert second.idle_power_w == pytest.approx(60.0, abs=1e-2)
    assert second.idle_source == "reused_from_process"
    assert second.idle_measured_at == first.idle_measured_at
    assert second.idle_age_s == pytest.approx(2.0 + 0.5 + 2.0)  # since the first start
    assert second.idle_adjusted_j == pytest.approx(second.total_j - 60.0 * 2.0, rel=1e-3)


def test_other_devices_get_their_own_baseline(install_nvml, make_session, clock):
    install_nvml([FakeGpu("GPU-a"), FakeGpu("GPU-b")])
    a = make_session(make_cfg(idle_baseline_s=1.0), indices=[0])
    a.start()
    b = make_session(make_cfg(idle_baseline_s=1.0), indices=[1])
    b.start()
    assert a.idle.source.value == b.idle.source.value == "measured_this_run"


def test_old_baseline_is_measured_again_once_cool(install_nvml, make_session, clock):
    # Idle at 35 C and 60 W; hot (75 C, 250 W) from T0 + 3 s to T0 + 8 s; then idle again at 50 W.
    def temp(t: float) -> float:
        return 75.0 if T0 + 3.0 <= t < T0 + 8.0 else 35.0

    def watts(t: float) -> float:
        return 60.0 if t < T0 + 3.0 else (250.0 if t < T0 + 8.0 else 50.0)

    class Power(Step):
        def power(self, t: float) -> float:
            return watts(t)

        def energy(self, a: float, b: float) -> float:
            edges = sorted({a, b, *(x for x in (T0 + 3.0, T0 + 8.0) if a < x < b)})
            return sum(watts(x) * (y - x) for x, y in zip(edges, edges[1:], strict=False))

    install_nvml([FakeGpu("GPU-a", power=Power(0, 0, 0), temperature_c=temp)])
    cfg = make_cfg(idle_baseline_s=2.0, idle_max_age_s=3.0, idle_temp_margin_c=3.0, cooldown_s=10.0)
    run_point(make_session, clock, cfg)  # ends at T0 + 4.5 s, hot
    s = make_session(cfg)
    s.start()  # the baseline is 4.5 s old: wait until 38 C (T0 + 8 s), then measure 2 s
    assert s.idle.source.value == "measured_this_run"
    assert s.idle.power_w == pytest.approx(50.0, abs=1e-2)
    assert clock.now() == pytest.approx(T0 + 10.0)


def test_old_baseline_is_kept_when_the_device_stays_hot(install_nvml, make_session, clock):
    install_nvml(
        [FakeGpu("GPU-a", power=Step(60.0, 250.0, T0 + 3.0), temperature_c=hot_after(T0 + 3.0))]
    )
    cfg = make_cfg(idle_baseline_s=2.0, idle_max_age_s=3.0, cooldown_s=1.0)
    run_point(make_session, clock, cfg)
    rep = run_point(make_session, clock, cfg)
    assert rep.energy.idle_source == "reused_from_process"
    assert rep.energy.idle_power_w == pytest.approx(60.0, abs=1e-2)
    [warning] = [w for w in rep.energy.warnings if "idle baseline" in w]
    assert "GPU-a at 75 C (idle 35 C)" in warning and "measurement.idle_max_age_s=3.0" in warning


def test_failed_baseline_is_not_reused(install_nvml, make_session, clock, idle_cache: IdleCache):
    install_nvml([FakeGpu("GPU-a", counter_update_s=10.0, counter_supported=True)])
    s = make_session(make_cfg(idle_baseline_s=1.0))
    s.start()  # the counter does not move in 1 s: no baseline
    assert s.idle.power_w is None and "no idle energy" in s.idle.null_reason
    s2 = make_session(make_cfg(idle_baseline_s=1.0))
    s2.start()
    assert s2.idle.source.value != "reused_from_process"


def test_no_baseline_is_recorded_as_such(install_nvml, make_session, clock):
    install_nvml([FakeGpu("GPU-a")])
    rep = run_point(make_session, clock, make_cfg(idle_baseline_s=0.0))
    assert rep.energy.idle_source == "not_measured"
    assert rep.energy.idle_measured_at is None
    assert "idle_baseline_s=0" in rep.null_reasons["energy.idle_measured_at"]


def test_only_sessions_given_the_same_cache_share_a_baseline(install_nvml, make_session, clock):
    """The cache is the caller's (one per process in the run layer), never a module global."""
    install_nvml([FakeGpu("GPU-a")])
    cfg = make_cfg(idle_baseline_s=1.0, idle_cache_max_age_s=0.0)  # no cache dir across processes
    shared = IdleCache()
    sources = []
    for cache in (None, None, shared, shared, IdleCache()):
        s = make_session(cfg, idle_cache=cache)
        s.start()
        sources.append(s.idle.source.value)
    measured, reused = "measured_this_run", "reused_from_process"
    assert sources == [measured, measured, measured, reused, measured]


def test_a_hot_second_process_uses_the_cool_baseline_of_the_first(
    install_nvml, make_session, clock, tmp_path, monkeypatch
):
    """One process per sweep point (submitit_local, joblib, SLURM): the second point's process
    shares nothing in memory with the first, only llem's cache directory, and starts with the
    GPU hot from the first point's window (75 C, idle draw 138 W against 70 W when cool)."""
    monkeypatch.setenv("LLEM_CACHE_DIR", str(tmp_path / "cache"))

    def temp(t: float) -> float:
        return 35.0 if t < T0 + 3.0 else 75.0

    class Power(Step):
        def power(self, t: float) -> float:
            return 70.0 if t < T0 + 3.0 else (300.0 if t < T0 + 5.0 else 138.0)

        def energy(self, a: float, b: float) -> float:
            edges = sorted({a, b, *(x for x in (T0 + 3.0, T0 + 5.0) if a < x < b)})
            return sum(self.power(x) * (y - x) for x, y in zip(edges, edges[1:], strict=False))

    install_nvml([FakeGpu("GPU-a", power=Power(0, 0, 0), temperature_c=temp)])
    cfg = make_cfg(idle_baseline_s=2.0)
    first = make_session(cfg, idle_cache=IdleCache())  # process 1: idle T0..T0+2, window to +4
    first.start()
    with first.window():
        clock.sleep(2.0)
    clock.sleep(1.0)
    second = make_session(cfg, idle_cache=IdleCache())  # process 2 starts at T0 + 5 s, hot
    second.start()
    with second.window():
        clock.sleep(2.0)
    e = second.measurement(output_tokens=100, requests=4).energy
    assert e.idle_power_w == pytest.approx(70.0)  # today: measured hot, 138 W
    assert e.idle_source == "cached"
    assert e.idle_temperature_c == {"GPU-a": 35.0}
    assert e.idle_age_s is not None and e.idle_age_s >= 0.0
    assert e.idle_adjusted_j == pytest.approx(e.total_j - 70.0 * e.window_s, rel=1e-6)
