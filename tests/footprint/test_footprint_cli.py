"""``python -m llem`` on the tiny model with a grid intensity, prices and the chassis asked for,
on a host whose BMC does not answer (a fake ipmitool on PATH that answers as the real one does
without a BMC device): the chassis null with ipmitool's words, carbon null with the reason
energy is unavailable, the capacity cost given; the terminal says the same."""

from __future__ import annotations

import json
import os

import pytest

from footprint.tiny_run import tiny_run
from llem.testing import fake_ipmitool, fake_redfish
from llem.testing.cli import output, run_llem

pytestmark = pytest.mark.slow


def test_a_run_without_a_bmc_prints_the_chassis_reason_and_its_carbon_and_cost_lines(
    tiny_model_dir, tmp_path, monkeypatch
):
    fake_ipmitool.install(tmp_path / "bin", [fake_ipmitool.NO_DEVICE])
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    run_dir = tmp_path / "run"
    proc = run_llem(
        *tiny_run(tiny_model_dir),
        "chassis.source=auto",
        "chassis.interval_s=0.2",
        "facility.pue=1.2",
        "carbon.intensity_g_per_kwh=400",
        "carbon.label=planted",
        "cost.usd_per_node_hour=3.6",
        f"hydra.run.dir={run_dir}",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, output(proc)
    no_bmc = (
        "no BMC: ipmitool dcmi power reading failed: Could not open device at /dev/ipmi0 or "
        "/dev/ipmi/0 or /dev/ipmidev/0: No such file or directory"
    )
    assert f"layers: chassis null ({no_bmc})" in proc.stdout, output(proc)
    assert "carbon: null (no layer was measured here" in proc.stdout
    assert "intensity 400 gCO2e/kWh (user value (carbon.intensity_g_per_kwh): planted)" in (
        proc.stdout
    )
    result = json.loads((run_dir / "result.json").read_text())
    assert result["null_reasons"]["layers.chassis_j"] == no_bmc
    assert result["layers"]["chassis_label"] == "measured"
    assert result["layers"]["facility_label"] == "modelled"
    fp = result["footprint"]
    assert fp["g_per_output_token"] is None
    window_s = result["energy"]["window_s"]
    assert fp["capacity_cost_usd"] == pytest.approx(window_s / 3600 * 3.6)
    tokens = result["workload"]["output_tokens"]
    assert fp["capacity_usd_per_million_output_tokens"] == pytest.approx(
        window_s / 3600 * 3.6 / tokens * 1e6
    )


def test_a_run_measures_the_chassis_over_redfish_and_never_writes_its_credentials(
    tiny_model_dir, tmp_path, monkeypatch
):
    """The chassis at a planted 250 W through the Redfish double, with the credentials in the
    environment: the layer is measured (250 W x the window, exact for a constant power), carbon
    is taken from it as the widest measured layer (the GPU's energy is unavailable here), and
    the password is in no file of the run directory."""
    secret = "planted-secret-c41b"
    monkeypatch.setenv("REDFISH_USERNAME", "root")
    monkeypatch.setenv("REDFISH_PASSWORD", secret)
    run_dir = tmp_path / "run"
    with fake_redfish.serve([250.0], user="root", password=secret) as (url, fake):
        proc = run_llem(
            *tiny_run(tiny_model_dir),
            "chassis.source=redfish",
            f"chassis.redfish_url={url}{fake_redfish.POWER}",
            "chassis.interval_s=0.2",
            "carbon.intensity_g_per_kwh=400",
            f"hydra.run.dir={run_dir}",
            cwd=tmp_path,
        )
    assert proc.returncode == 0, output(proc)
    assert fake.calls >= 3  # pre-flight's, and at least both edges of the window
    result = json.loads((run_dir / "result.json").read_text())
    layers, window_s = result["layers"], result["energy"]["window_s"]
    assert layers["chassis_label"] == "measured"
    assert layers["chassis_source"] == f"Redfish GET {url}{fake_redfish.POWER}"
    assert layers["widest_measured"] == "chassis"
    chassis_j = layers["chassis_j"]
    assert chassis_j == pytest.approx(250.0 * window_s, rel=1e-4)  # window_s: to the microsecond
    tokens = result["workload"]["output_tokens"]
    assert result["footprint"]["g_per_output_token"] == pytest.approx(
        chassis_j / 3.6e6 * 400 / tokens
    )
    leaked = [
        p for p in run_dir.rglob("*") if p.is_file() and secret in p.read_text(errors="replace")
    ]
    assert leaked == [] and secret not in proc.stdout + proc.stderr
