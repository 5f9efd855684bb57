"""The idle baseline across processes (one per sweep point: submitit_local, joblib, SLURM): two
sessions that share nothing in memory, only llem's cache directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llem.measure.idle import IdleBaseline, IdleCache, IdleSource
from llem.measure.idle_store import FILE_NAME, IdleStore
from llem.testing.fake_pynvml import FakeGpu, Waveform

from .conftest import make_cfg

T0 = 1000.0
UNIX = 1.7e9  # the wall clock is the session clock shifted by this


class AfterAPoint(Waveform):
    """Idle at 70 W and 35 C until T0 + 3 s; a point's window at 300 W and 75 C until T0 + 5 s;
    then the GPU sits idle but hot, its idle draw (leakage) and temperature falling linearly
    from 138 W and 75 C back to 70 W and 35 C by T0 + 15 s."""

    def power(self, t: float) -> float:
        if t < T0 + 3.0:
            return 70.0
        if t < T0 + 5.0:
            return 300.0
        return 70.0 + 68.0 * max(0.0, (T0 + 15.0 - t) / 10.0)

    def energy(self, a: float, b: float) -> float:
        n = 2000
        step = (b - a) / n
        return sum(self.power(a + (i + 0.5) * step) for i in range(n)) * step

    @staticmethod
    def temperature(t: float) -> float:
        if t < T0 + 3.0:
            return 35.0
        if t < T0 + 5.0:
            return 75.0
        return 35.0 + 40.0 * max(0.0, (T0 + 15.0 - t) / 10.0)


def gpu() -> FakeGpu:
    return FakeGpu("GPU-a", power=AfterAPoint(), temperature_c=AfterAPoint.temperature)


def process(make_session, clock, cache_dir: Path, cfg, window_s: float = 2.0):
    """One sweep point in a process of its own: a fresh IdleCache and IdleStore (nothing shared
    in memory with another point), the same cache directory."""
    store = IdleStore(cache_dir, now=lambda: clock.now() + UNIX)
    s = make_session(cfg, idle_cache=IdleCache(), idle_store=store)
    s.start()
    with s.window():
        clock.sleep(window_s)
    return s, s.measurement(output_tokens=100, requests=4)


def test_a_hot_second_process_uses_the_cool_baseline_of_the_first(
    install_nvml, make_session, clock, tmp_path
):
    install_nvml([gpu()])
    cfg = make_cfg(idle_baseline_s=2.0)
    first, m1 = process(make_session, clock, tmp_path, cfg)  # idle T0..T0+2, window to T0+4
    assert m1.energy.idle_source == "measured_this_run"
    assert m1.energy.idle_power_w == pytest.approx(70.0)
    stored = json.loads((tmp_path / FILE_NAME).read_text())["gpus"]["GPU-a"]
    assert (stored["power_w"], stored["temperature_c"]) == (pytest.approx(70.0), 35.0)

    clock.sleep(1.0)  # the next point's process starts at T0 + 5 s: 75 C, idle draw 138 W
    second, m2 = process(make_session, clock, tmp_path, cfg)
    e = m2.energy
    assert e.idle_source == "cached"  # today: measured again, hot: 138 W against 70 W true
    assert e.idle_power_w == pytest.approx(70.0)
    assert e.idle_temperature_c == {"GPU-a": 35.0}
    assert e.idle_age_s == pytest.approx(5.0)  # measured at T0, used at T0 + 5 s
    assert e.idle_measured_at == m1.energy.idle_measured_at
    assert e.idle_adjusted_j == pytest.approx(e.total_j - 70.0 * e.window_s, rel=1e-6)
    assert any("a GPU hotter than its idle temperature" in w for w in e.warnings)
    # it did not sit in a 2 s "idle" window: the window starts right away
    assert second.last_window is not None and second.last_window.start_s == pytest.approx(T0 + 5.0)


def test_the_second_process_waits_for_the_gpu_to_cool_back(
    install_nvml, make_session, clock, tmp_path
):
    install_nvml([gpu()])
    cfg = make_cfg(idle_baseline_s=2.0, cooldown_s=20.0, idle_temp_margin_c=3.0)
    process(make_session, clock, tmp_path, cfg)
    clock.sleep(1.0)
    second, m2 = process(make_session, clock, tmp_path, cfg)
    assert m2.energy.idle_source == "cached"
    assert not any("hotter than its idle temperature" in w for w in m2.energy.warnings)
    # 75 C falls 4 C/s from T0 + 5 s: within 3 C of 35 C from T0 + 14.25 s (polled every 0.5 s)
    assert second.last_window is not None
    assert second.last_window.start_s == pytest.approx(T0 + 14.5)


def test_a_stored_baseline_older_than_the_limit_is_measured_again(
    install_nvml, make_session, clock, tmp_path
):
    install_nvml([gpu()])
    cfg = make_cfg(idle_baseline_s=2.0, idle_cache_max_age_s=3.0, cooldown_s=20.0)
    process(make_session, clock, tmp_path, cfg)
    clock.sleep(1.0)  # 5 s old: too old, so wait until cool (T0 + 14.5 s), then measure
    _, m2 = process(make_session, clock, tmp_path, cfg)
    assert m2.energy.idle_source == "measured_this_run"
    assert m2.energy.idle_power_w == pytest.approx(70.0 + 68.0 * 0.45 / 10.0, abs=0.5)


def test_the_cache_directory_comes_from_llem_cache_dir(
    install_nvml, make_session, clock, tmp_path, monkeypatch
):
    monkeypatch.setenv("LLEM_CACHE_DIR", str(tmp_path / "cache"))
    install_nvml([gpu()])
    s = make_session(make_cfg(idle_baseline_s=1.0), idle_cache=IdleCache())
    s.start()
    assert "GPU-a" in json.loads((tmp_path / "cache" / FILE_NAME).read_text())["gpus"]
    off = make_session(make_cfg(idle_baseline_s=1.0, idle_cache_max_age_s=0.0), idle_cache=None)
    off.start()
    assert off.idle.source is IdleSource.measured_this_run


def _baseline(watts: float, temp: float) -> IdleBaseline:
    return IdleBaseline(
        watts,
        {"GPU-a": temp},
        window_s=2.0,
        per_device_w={"GPU-a": watts},
        per_device_uncertainty_w={"GPU-a": 1.0},
        source=IdleSource.measured_this_run,
        measured_at="2026-11-24T09:00:00+00:00",
    )


def test_the_store_keeps_the_coolest_recent_baseline(tmp_path):
    now = [UNIX]
    store = IdleStore(tmp_path, now=lambda: now[0])
    store.remember(_baseline(80.0, 45.0), max_age_s=3600)
    store.remember(_baseline(70.0, 35.0), max_age_s=3600)  # cooler: replaces
    store.remember(_baseline(120.0, 70.0), max_age_s=3600)  # hotter: kept out
    entry = (store.lookup(["GPU-a"]) or {})["GPU-a"]
    assert (entry.power_w, entry.temperature_c, entry.power_uncertainty_w) == (70.0, 35.0, 1.0)
    now[0] += 4000.0  # the cool one expired: the next measurement replaces it, whatever its heat
    store.remember(_baseline(90.0, 50.0), max_age_s=3600)
    assert (store.lookup(["GPU-a"]) or {})["GPU-a"].power_w == 90.0
    assert store.lookup(["GPU-a", "GPU-b"]) is None  # every measured GPU needs one


def test_an_unreadable_cache_file_is_a_warning(tmp_path):
    (tmp_path / FILE_NAME).write_text("{not json")
    store = IdleStore(tmp_path)
    assert store.lookup(["GPU-a"]) is None
    assert store.warnings and "not readable" in store.warnings[0]


def test_a_baseline_measured_under_other_gpu_settings_is_not_used(
    install_nvml, make_session, clock, tmp_path
):
    """A locked clock draws more at idle: a point of a sweep over gpu.* must not take the idle
    baseline of another setting, neither from this process nor from the cache directory."""
    install_nvml([gpu()])
    cfg = make_cfg(idle_baseline_s=2.0, cooldown_s=20.0)
    shared = IdleCache()  # one process running both points (model reuse)

    def point(settings: str):
        store = IdleStore(tmp_path, now=lambda: clock.now() + UNIX, settings=settings)
        s = make_session(cfg, idle_cache=shared, idle_store=store, gpu_settings=settings)
        s.start()
        with s.window():
            clock.sleep(2.0)
        return s.measurement(output_tokens=100, requests=4).energy

    assert point("").idle_source == "measured_this_run"
    clock.sleep(12.0)  # cool again
    locked = point("gpu.sm_clock_mhz=1200")
    assert locked.idle_source == "measured_this_run"  # neither the in-process nor the stored one
    stored = json.loads((tmp_path / FILE_NAME).read_text())["gpus"]
    assert set(stored) == {"GPU-a", "GPU-a [gpu.sm_clock_mhz=1200]"}
    assert point("gpu.sm_clock_mhz=1200").idle_source != "measured_this_run"  # its own: reused
