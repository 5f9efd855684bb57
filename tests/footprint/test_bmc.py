"""The BMC's DCMI power reading through ipmitool: the documented output read, each documented
failure one line, and the chassis layer's energy equal to the planted integral within its bound
(a fake ipmitool on PATH, kept with the NVML and amdsmi doubles in llem/testing)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from llem.devices.bmc import (
    FREEIPMI,
    BmcError,
    IpmitoolReader,
    dcmi_reader,
    no_bmc_reason,
    parse_reading,
)
from llem.measure.chassis import ChassisMeter
from llem.testing import fake_ipmitool
from llem.testing.clocks import SteppingClock


@pytest.fixture
def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    def put(answers):
        bin_dir = tmp_path / "bin"
        fake_ipmitool.install(bin_dir, answers)
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        return bin_dir

    return put


def test_the_instantaneous_reading_is_read_from_the_documented_output():
    text = fake_ipmitool.printed_reading(fake_ipmitool.READING, 280, "activated")
    assert parse_reading(text) == 280.0


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (
            fake_ipmitool.NO_DEVICE,
            "no BMC: ipmitool dcmi power reading failed: Could not open device at /dev/ipmi0",
        ),
        (
            fake_ipmitool.INVALID,
            "no BMC: ipmitool dcmi power reading failed: DCMI request failed because: "
            "Invalid command (c1)",
        ),
        (fake_ipmitool.DEACTIVATED, "no BMC: ipmitool dcmi power reading the BMC's power reading "),
        (fake_ipmitool.EMPTY, "no BMC: ipmitool dcmi power reading answered without a power "),
    ],
)
def test_each_failure_is_one_line_with_the_tools_words(on_path, answer, said):
    on_path([answer])
    with pytest.raises(BmcError) as caught:
        IpmitoolReader().read_w()
    reason = no_bmc_reason(caught.value)
    assert reason.startswith(said)
    assert "\n" not in reason


def test_a_missing_tool_says_so_and_not_that_there_is_no_bmc():
    reader = IpmitoolReader(which=lambda name: None)
    with pytest.raises(BmcError) as caught:
        reader.read_w()
    assert no_bmc_reason(caught.value).startswith("chassis not measured: ipmitool is not installed")


def test_the_chassis_energy_is_the_planted_integral_within_its_bound(on_path):
    # Planted: 200 W until t = 2.2 s, then 300 W, over a 5 s window read at 0, 1, ..., 5 s.
    # Truth: 200 x 2.2 + 300 x 2.8 = 1280 J. The readings 200, 200, 200, 300, 300, 300 give the
    # trapezoid 200 x 2 + 250 x 1 + 300 x 2 = 1250 J; its bound: the step, 100 W x 1 s / 2 = 50 J,
    # plus whole watts, 0.5 W x 5 s = 2.5 J: 52.5 J, which holds the truth (30 J off).
    bin_dir = on_path([200, 200, 200, 300, 300, 300])
    clock = SteppingClock(start=0.0)
    meter = ChassisMeter(IpmitoolReader(), clock, interval_s=1.0)
    meter.begin(clock.now())
    clock.sleep(5.0)
    wall = meter.end(clock.now())
    # begin's reading, the sampler's at 1..5 s, and end's (at 5 s again: a repeated point)
    assert fake_ipmitool.calls(bin_dir) == 7
    assert wall.null_reason is None
    assert wall.energy_j == pytest.approx(1250.0)
    assert wall.uncertainty_j == pytest.approx(52.5)
    assert abs(wall.energy_j - 1280.0) <= wall.uncertainty_j
    assert wall.components == pytest.approx({"trapezoid_j": 50.0, "resolution_j": 2.5})
    assert wall.readings == 7


def test_a_reading_that_fails_mid_window_voids_the_layer_only(on_path):
    on_path([250, 250, fake_ipmitool.NO_DEVICE])
    clock = SteppingClock(start=0.0)
    meter = ChassisMeter(IpmitoolReader(), clock, interval_s=1.0)
    meter.begin(clock.now())
    clock.sleep(3.0)
    wall = meter.end(clock.now())
    assert wall.energy_j is None
    assert wall.null_reason is not None
    assert wall.null_reason.startswith("no BMC: ipmitool dcmi power reading failed: Could not")


def test_the_sessions_window_reads_the_bmc_and_keeps_the_chassis_energy(on_path):
    from llem.config.schema import EnergySource, MeasurementConfig
    from llem.measure import MeasurementSession

    on_path([180])
    cfg = MeasurementConfig(energy=EnergySource.none, idle_baseline_s=0.0, cooldown_s=0.0)
    session = MeasurementSession(
        cfg, device_type="cpu", wall=IpmitoolReader(), wall_interval_s=0.05
    )
    session.start()
    with session.window():
        session.clock.sleep(0.3)
    wall = session.last_chassis()
    session.close()
    assert wall is not None and wall.null_reason is None
    assert wall.readings >= 2
    # a constant 180 W: the trapezoid is exact, the bound is the whole watts' only
    assert wall.energy_j == pytest.approx(180.0 * wall.window_s)
    assert wall.components["trapezoid_j"] == 0.0


# ------------------------------------------------------------------ FreeIPMI's ipmi-dcmi
@pytest.fixture
def freeipmi_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    def put(answers):
        bin_dir = tmp_path / "bin"
        fake_ipmitool.install(bin_dir, answers, tool="freeipmi")
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        return bin_dir

    return put


def test_freeipmis_current_power_is_read_from_its_output():
    text = fake_ipmitool.printed_reading(fake_ipmitool.FREEIPMI_READING, 332, "Active")
    assert parse_reading(text, FREEIPMI) == 332.0
    with pytest.raises(BmcError, match="state is Not Available"):
        parse_reading(
            fake_ipmitool.printed_reading(fake_ipmitool.FREEIPMI_READING, 0, "Not Available"),
            FREEIPMI,
        )
    # ipmitool's output is not FreeIPMI's: neither reads the other's reading
    with pytest.raises(BmcError, match="without a power reading"):
        parse_reading(fake_ipmitool.printed_reading(fake_ipmitool.READING, 280, "Active"), FREEIPMI)


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (
            fake_ipmitool.NO_DEVICE,
            "no BMC: ipmi-dcmi --get-system-power-statistics failed: could not find inband device",
        ),
        (
            fake_ipmitool.DEACTIVATED,
            "no BMC: ipmi-dcmi --get-system-power-statistics the BMC's power reading state is "
            "Not Available",
        ),
    ],
)
def test_freeipmis_failures_are_one_line_with_its_words(freeipmi_on_path, answer, said):
    freeipmi_on_path([answer])
    with pytest.raises(BmcError) as caught:
        IpmitoolReader(tool=FREEIPMI).read_w()
    assert no_bmc_reason(caught.value) == said


def test_the_chassis_energy_through_freeipmi_is_the_planted_integral(freeipmi_on_path):
    # Planted: 400 W, then 460 W from the third reading, read at 0, 1, 2, 3 s and at the end
    # (3 s again): the trapezoid 400 + 430 + 460 = 1290 J; bound 60 x 1 / 2 + 0.5 x 3 = 31.5 J
    bin_dir = freeipmi_on_path([400, 400, 460])
    clock = SteppingClock(start=0.0)
    meter = ChassisMeter(IpmitoolReader(tool=FREEIPMI), clock, interval_s=1.0)
    meter.begin(clock.now())
    clock.sleep(3.0)
    wall = meter.end(clock.now())
    assert fake_ipmitool.calls(bin_dir) == 5
    assert wall.energy_j == pytest.approx(1290.0)
    assert wall.uncertainty_j == pytest.approx(31.5)
    assert wall.source == "ipmi-dcmi --get-system-power-statistics"


@pytest.mark.parametrize(
    ("installed", "picked"),
    [
        ({"ipmitool", "ipmi-dcmi"}, "ipmitool dcmi power reading"),
        ({"ipmi-dcmi"}, "ipmi-dcmi --get-system-power-statistics"),
        (set(), "ipmitool dcmi power reading"),  # neither: ipmitool's reader says it is missing
    ],
)
def test_auto_reads_through_ipmitool_or_freeipmi_where_only_it_is_installed(installed, picked):
    reader = dcmi_reader(which=lambda name: f"/usr/bin/{name}" if name in installed else None)
    assert reader.source == picked
