"""An ElectricityMaps zone's grid intensity for the window's hour: the planted intensity of that
hour and of no neighbour, the key sent in the header the API documents and taken from the
environment alone, refusals in one line before anything is measured, and a failure after the
window a null with the reason (a local double that answers as the API does, kept with the other
doubles in llem/testing)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hydra import compose, initialize_config_module

from llem.config.schema import ExperimentConfig
from llem.config.store import register_configs
from llem.config.validate import to_experiment
from llem.errors import ConfigError
from llem.result import Figure, RunResult
from llem.result.boundary import Boundary
from llem.runner import electricitymaps
from llem.runner.electricitymaps import KEY_ENV, KEY_FILE_ENV
from llem.runner.footprint import fill_footprint, footprint_preflight
from llem.testing import fake_electricitymaps

KEY = "planted-emaps-key-5d1e"
HOUR = datetime(2026, 3, 14, 13, 0, tzinfo=timezone.utc)
#: a different intensity for each neighbouring hour, so a window put in the wrong hour is seen
PLANTED = {HOUR - timedelta(hours=1): 111.0, HOUR: 250.0, HOUR + timedelta(hours=1): 999.0}
#: the window starts 59 min 59.9 s into the hour (and ends in the next one)
START = HOUR + timedelta(minutes=59, seconds=59.9)


@pytest.fixture(autouse=True)
def _no_key_from_the_host(monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv(KEY_FILE_ENV, raising=False)


def _exp(url: str, zone: str = "DE") -> ExperimentConfig:
    exp = ExperimentConfig()
    exp.carbon.zone, exp.carbon.electricitymaps_url = zone, url
    return exp


def _result(gpu_j: float) -> RunResult:
    r = RunResult(status="ok")
    r.workload.output_tokens, r.workload.requests = 2000, 40
    r.set_figure("energy.window_s", Figure(120.0))
    r.boundary = Boundary(boundary="gpu", gpus=["GPU-a"])
    r.set_figure("boundary.gpu_j", Figure(gpu_j, 36.0))
    return r


def test_the_carbon_per_token_is_the_energy_times_the_planted_intensity_of_the_windows_hour(
    monkeypatch,
):
    monkeypatch.setenv(KEY_ENV, KEY)
    r = _result(7.2e6)  # 2 kWh
    with fake_electricitymaps.serve(PLANTED, KEY) as (url, fake):
        fill_footprint(_exp(url), r, None, START)
    fp = r.footprint
    assert fp is not None
    # 2 kWh x 250 g/kWh = 500 g over 2,000 tokens: 0.25 g per token (111: an hour early; 999:
    # the hour the window ended in)
    assert fp.intensity_g_per_kwh == 250.0
    assert fp.carbon_g == pytest.approx(500.0)
    assert fp.g_per_output_token == pytest.approx(0.25)
    assert fp.intensity_basis == "location"
    assert fp.intensity_source == (
        "ElectricityMaps zone DE, hour 2026-03-14T13:00:00Z (the window's start, UTC, floored), "
        "lifecycle emission factors, measured, location-based"
    )
    assert (fp.intensity_hour, fp.intensity_estimated, fp.intensity_emission_factor_type) == (
        "2026-03-14T13:00:00Z",
        False,
        "lifecycle",
    )
    assert fake.past_hours() == ["2026-03-14T13:00:00Z"]
    assert [r.with_key for r in fake.requests] == [True]


def test_a_window_started_in_another_time_zone_is_asked_for_by_its_utc_hour(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    paris = timezone(timedelta(hours=1))
    with fake_electricitymaps.serve(PLANTED, KEY, estimated=True) as (url, fake):
        got = electricitymaps.hour_intensity("DE", url, datetime(2026, 3, 14, 13, 30, tzinfo=paris))
    assert fake.past_hours() == ["2026-03-14T12:00:00Z"]
    assert got.g_per_kwh == 111.0
    assert "estimated (TIME_SLICER_AVERAGE)" in got.source
    assert (got.hour, got.estimated) == ("2026-03-14T12:00:00Z", True)


def test_the_key_may_come_from_a_file_the_environment_names(monkeypatch, tmp_path):
    (tmp_path / "key").write_text(KEY + "\n")
    monkeypatch.setenv(KEY_FILE_ENV, str(tmp_path / "key"))
    with fake_electricitymaps.serve(PLANTED, KEY) as (url, fake):
        assert footprint_preflight(_exp(url)) == []
    assert [(r.path, r.with_key) for r in fake.requests] == [(fake_electricitymaps.LATEST, True)]


@pytest.mark.parametrize(
    ("environ", "zone", "said"),
    [
        (
            {},
            "DE",
            "carbon.zone=DE needs an ElectricityMaps API key: set ELECTRICITYMAPS_API_KEY (or "
            "ELECTRICITYMAPS_API_KEY_FILE to a file holding it)",
        ),
        (
            {KEY_ENV: "wrong"},
            "DE",
            "ElectricityMaps GET {url}/v3/carbon-intensity/latest?zone=DE answered HTTP 401: "
            "Invalid authentication token (check the key in ELECTRICITYMAPS_API_KEY)",
        ),
        (
            {KEY_ENV: KEY},
            "XX",
            "carbon.zone=XX: ElectricityMaps GET {url}/v3/carbon-intensity/latest?zone=XX "
            "answered HTTP 404: Zone 'XX' does not exist. (check the zone's name)",
        ),
    ],
    ids=["no key", "wrong key", "unknown zone"],
)
def test_preflight_refuses_in_one_line(monkeypatch, environ, zone, said):
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    with fake_electricitymaps.serve(PLANTED, KEY) as (url, _):
        (line,) = footprint_preflight(_exp(url, zone))
    assert line == said.format(url=url)
    assert "\n" not in line


def test_preflight_names_the_url_and_the_error_where_nothing_answers(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    with fake_electricitymaps.serve(PLANTED, KEY) as (url, _):
        pass  # stopped: nothing listens there now
    (line,) = footprint_preflight(_exp(url))
    assert line.startswith(f"ElectricityMaps GET {url}/v3/carbon-intensity/latest?zone=DE failed")
    assert "Connection refused" in line


def test_a_failure_after_the_window_nulls_carbon_with_the_reason_and_keeps_the_rest(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    r = _result(7.2e6)
    exp = _exp("")
    exp.cost.usd_per_kwh = 0.2
    with fake_electricitymaps.serve(PLANTED, KEY, fail_past=503) as (url, fake):
        exp.carbon.electricitymaps_url = url
        fill_footprint(exp, r, None, START)
    fp = r.footprint
    assert fp is not None
    assert fp.intensity_g_per_kwh is None and fp.g_per_output_token is None
    assert fp.carbon_g is None
    assert r.null_reasons["footprint.g_per_output_token"] == (
        "no grid intensity for the window's hour: ElectricityMaps GET "
        f"{url}/v3/carbon-intensity/past?zone=DE&datetime=2026-03-14T13%3A00%3A00Z answered "
        "HTTP 503: Service temporarily unavailable"
    )
    assert fp.energy_j == pytest.approx(7.2e6)  # the energy and its cost are untouched
    assert fp.energy_cost_usd == pytest.approx(0.4)
    assert fake.past_hours() == ["2026-03-14T13:00:00Z"]


def _compose(*overrides: str) -> ExperimentConfig:
    register_configs()
    with initialize_config_module(config_module="llem.conf", version_base="1.3"):
        return to_experiment(compose("config", overrides=list(overrides)))


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        (
            ("carbon.zone=DE", "carbon.country=DEU"),
            "carbon.country=DEU and carbon.zone=DE each give the grid intensity (set one)",
        ),
        (
            ("carbon.zone=DE", "carbon.intensity_g_per_kwh=300"),
            "carbon.intensity_g_per_kwh=300.0 and carbon.zone=DE each give the grid intensity "
            "(set one)",
        ),
        (
            ("carbon.zone='DE?x=1'",),
            "carbon.zone=DE?x=1 is not an ElectricityMaps zone (allowed: letters, digits and "
            "dashes, e.g. DE, FR, US-CAL-CISO)",
        ),
        (
            ("carbon.zone=DE", "carbon.electricitymaps_url=api.electricitymaps.com"),
            "carbon.electricitymaps_url=api.electricitymaps.com is not an http:// or https:// URL",
        ),
    ],
)
def test_zone_keys_are_checked_with_one_line_each(overrides, line):
    with pytest.raises(ConfigError) as caught:
        _compose(*overrides)
    assert line in caught.value.problems, caught.value.problems
