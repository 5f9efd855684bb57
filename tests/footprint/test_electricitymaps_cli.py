"""``python -m llem carbon.zone=DE`` on the tiny model against a local double of ElectricityMaps'
API (and the chassis at a planted 250 W through the Redfish double, the run's measured layer on a
CPU): the carbon per token is the chassis's energy times the planted intensity of the window's
hour, the key is sent and written nowhere; a refused key, an unknown zone and a server that does
not answer stop the run in pre-flight in one line (exit 3); a failure after the window leaves the
run and its energy and nulls the carbon with the reason."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from footprint.tiny_run import tiny_run
from llem.runner.electricitymaps import KEY_ENV, KEY_FILE_ENV
from llem.testing import fake_electricitymaps, fake_redfish
from llem.testing.cli import output
from llem.testing.forked_cli import run_llem

pytestmark = pytest.mark.slow

KEY = "planted-emaps-key-9c27"


def _hours() -> dict[datetime, float]:
    """A different intensity for each hour from three before now to three after."""
    now = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)
    return {now + timedelta(hours=h): 300.0 + 37.0 * h for h in range(-3, 4)}


def _run(tmp_path: Path, model_dir: Path, emaps_url: str, *extra: str):
    return run_llem(
        *tiny_run(model_dir),
        "carbon.zone=DE",
        f"carbon.electricitymaps_url={emaps_url}",
        f"hydra.run.dir={tmp_path / 'run'}",
        *extra,
        cwd=tmp_path,
    )


def _run_with_chassis(
    tmp_path: Path, model_dir: Path, hours: dict[datetime, float], **emaps: Any
) -> tuple[Any, fake_electricitymaps.FakeEmaps]:
    """A run whose chassis is read at a planted 250 W over the Redfish double, its intensity
    asked of the ElectricityMaps double (``emaps``: the double's options): the run's process and
    the double's state."""
    with (
        fake_redfish.serve([250.0]) as (bmc, _),
        fake_electricitymaps.serve(hours, KEY, **emaps) as (url, fake),
    ):
        proc = _run(
            tmp_path,
            model_dir,
            url,
            "chassis.source=redfish",
            f"chassis.redfish_url={bmc}{fake_redfish.POWER}",
            "chassis.interval_s=0.2",
        )
    return proc, fake


def _leaks(run_dir: Path, proc) -> list[str]:
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    found = [str(p) for p in files if KEY in p.read_text(errors="replace")]
    return found + (["terminal"] if KEY in proc.stdout + proc.stderr else [])


def test_a_run_takes_the_planted_intensity_of_its_windows_hour_and_never_writes_the_key(
    tiny_model_dir, tmp_path, monkeypatch
):
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.delenv(KEY_FILE_ENV, raising=False)
    hours = _hours()
    proc, fake = _run_with_chassis(tmp_path, tiny_model_dir, hours)
    assert proc.returncode == 0, output(proc)
    # pre-flight's request for the latest hour, then one for the window's hour after it
    paths = [(r.path, r.with_key) for r in fake.requests]
    assert paths == [(fake_electricitymaps.LATEST, True), (fake_electricitymaps.PAST, True)]
    (asked,) = fake.past_hours()
    hour = datetime.fromisoformat(asked.replace("Z", "+00:00"))
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    started = datetime.fromisoformat(result["started_at"])
    ran = started + timedelta(seconds=result["duration_s"])
    assert started.replace(minute=0, second=0) <= hour <= ran  # the run's own hour
    fp, chassis_j = result["footprint"], result["layers"]["chassis_j"]
    tokens = result["workload"]["output_tokens"]
    assert fp["intensity_g_per_kwh"] == hours[hour]
    assert fp["g_per_output_token"] == pytest.approx(chassis_j / 3.6e6 * hours[hour] / tokens)
    assert fp["intensity_basis"] == "location"
    assert fp["intensity_hour"] == asked and fp["intensity_estimated"] is False
    assert fp["intensity_source"].startswith(f"ElectricityMaps zone DE, hour {asked}")
    assert "carbon: " in proc.stdout and "ElectricityMaps zone DE" in proc.stdout
    assert _leaks(tmp_path / "run", proc) == []


@pytest.mark.parametrize(
    ("key", "zone", "line"),
    [
        ("wrong", "DE", "answered HTTP 401: Invalid authentication token (check the key in "),
        (KEY, "XX", "carbon.zone=XX: ElectricityMaps GET "),
        (KEY, "DE", "failed: [Errno 111] Connection refused"),
    ],
    ids=["refused key", "unknown zone", "nothing answers"],
)
def test_preflight_refuses_in_one_line_with_exit_3(
    tiny_model_dir, tmp_path, monkeypatch, key, zone, line
):
    monkeypatch.setenv(KEY_ENV, key)
    with fake_electricitymaps.serve(_hours(), KEY) as (url, _):
        if "Connection refused" not in line:
            proc = _run(tmp_path, tiny_model_dir, url, f"carbon.zone={zone}")
    if "Connection refused" in line:
        proc = _run(tmp_path, tiny_model_dir, url)  # the double is stopped: nothing listens
    assert proc.returncode == 3, output(proc)
    (error,) = [x for x in proc.stderr.splitlines() if x.startswith("error: ")]
    assert error.startswith("error: 1 pre-flight check failed: ")
    assert line in error
    assert "Traceback" not in proc.stderr and KEY not in proc.stderr
    assert not (tmp_path / "run" / "result.json").exists()  # nothing measured


def test_a_failure_after_the_window_nulls_carbon_with_the_reason_and_the_run_succeeds(
    tiny_model_dir, tmp_path, monkeypatch
):
    monkeypatch.setenv(KEY_ENV, KEY)
    proc, fake = _run_with_chassis(tmp_path, tiny_model_dir, _hours(), fail_past=503)
    assert proc.returncode == 0, output(proc)
    assert len(fake.past_hours()) == 1
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["status"] == "ok"
    # window_s is rounded to the microsecond: on a window of a few tens of ms, 1e-5 of it
    assert result["layers"]["chassis_j"] == pytest.approx(
        250.0 * result["energy"]["window_s"], rel=1e-4
    )
    assert result["footprint"]["g_per_output_token"] is None
    why = result["null_reasons"]["footprint.g_per_output_token"]
    assert why.startswith("no grid intensity for the window's hour: ElectricityMaps GET ")
    assert why.endswith("answered HTTP 503: Service temporarily unavailable")
    assert f"carbon: null ({why})" in proc.stdout
    assert _leaks(tmp_path / "run", proc) == []
