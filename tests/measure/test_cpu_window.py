"""CPU package energy of a measured window, read through the device layer's ``RaplReader`` on a
planted powercap tree: wrap-around, reads inside long windows, no RAPL, a root-only counter."""

from __future__ import annotations

import pytest

from llem.config.schema import EnergySource
from llem.devices.cpu_energy import RaplReader
from llem.testing.planted_rapl import MAX_UJ, ScriptedCounters, plant_zone

from .conftest import make_cfg


@pytest.fixture
def powercap(tmp_path):
    root = tmp_path / "powercap"
    files = {
        "pkg0": plant_zone(root, "intel-rapl:0", "package-0", MAX_UJ - 5_000_000),
        "core": plant_zone(root, "intel-rapl:0:0", "core", 1_000),  # inside package-0: not added
        "psys": plant_zone(root, "intel-rapl:1", "psys", 7_000),  # holds the packages: not added
        "pkg1": plant_zone(root, "intel-rapl:2", "package-1", 10_000_000),
    }
    return root, files


def cpu_session(make_session, **kw):
    return make_session(make_cfg(energy=EnergySource.auto), device_type="cpu", indices=None, **kw)


def test_session_reports_cpu_energy(powercap, make_session, clock):
    root, f = powercap
    s = cpu_session(make_session, powercap_root=root)
    s.start()
    assert s.measures_energy  # RAPL alone: the window is stretched to min_window_s
    with s.window():
        f["pkg0"].write_text("1000000\n")  # wrapped: 5 J + 1 J
        clock.sleep(0.5)
        f["pkg0"].write_text("2000000\n")  # +1 J
        f["pkg1"].write_text("13000000\n")  # +3 J
        f["core"].write_text("999999999\n")  # inside package-0: not added
        f["psys"].write_text("999999999\n")  # the platform: not added
        clock.sleep(0.5)
    e = s.measurement(output_tokens=1, requests=1).energy
    assert (e.cpu_source, e.cpu_unavailable_reason) == ("rapl", None)
    assert e.cpu_package_j == pytest.approx(10.0)


def test_long_window_is_read_in_between_so_two_wraps_are_counted(tmp_path, make_session, clock):
    # a 1000 J range read at 500 W at most: must be read every 2 s; the window lasts 3 s and the
    # counter wraps twice in it (900 -> 300 -> 700 -> 100 J: 400 J a second, 1200 J in all)
    top = 1_000_000_000
    pkg = plant_zone(tmp_path / "pc", "intel-rapl:0", "package-0", 900_000_000, max_uj=top)
    s = cpu_session(make_session, powercap_root=tmp_path / "pc")
    s.start()
    with s.window():
        for value in (300_000_000, 700_000_000, 100_000_000):
            clock.sleep(1.0)  # the sampler's ticks read RAPL every 0.5 s
            pkg.write_text(f"{value}\n")
        clock.sleep(0.2)
    assert s.measurement(output_tokens=1, requests=1).energy.cpu_package_j == pytest.approx(1200.0)


def test_no_rapl_on_this_machine(tmp_path, make_session):
    s = cpu_session(make_session, powercap_root=tmp_path / "nothing")
    s.start()
    assert not s.measures_energy
    with s.window():
        pass
    e = s.measurement(output_tokens=1, requests=1).energy
    assert e.cpu_package_j is None and e.cpu_source == "unavailable"
    assert e.cpu_unavailable_reason.startswith("no RAPL on this machine: ")


def test_root_only_counter_gives_the_permission_reason(powercap, make_session, clock):
    root, f = powercap
    denied = ScriptedCounters({f["pkg1"]: [PermissionError(13, "Permission denied")]})
    s = cpu_session(make_session, rapl=RaplReader(root, read_text=denied, clock=clock.now))
    s.start()
    assert not s.measures_energy  # a counter that does not read: nothing to stretch for
    with s.window():
        clock.sleep(0.5)
    e = s.measurement(output_tokens=1, requests=1).energy
    assert e.cpu_package_j is None
    assert e.cpu_unavailable_reason.startswith("package-1: permission denied reading ")
    assert "root" in e.cpu_unavailable_reason
