"""CPU package energy from fake powercap files, wraparound included."""

from __future__ import annotations

import pytest

from llem.config.schema import EnergySource
from llem.measure.rapl import RaplMeter

from .conftest import make_cfg

MAX_UJ = 262_143_328_850


def zone(root, name, label, energy_uj, max_uj=MAX_UJ):
    d = root / name
    d.mkdir(parents=True)
    (d / "name").write_text(label + "\n")
    (d / "energy_uj").write_text(f"{energy_uj}\n")
    (d / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return d / "energy_uj"


@pytest.fixture
def powercap(tmp_path):
    root = tmp_path / "powercap"
    files = {
        "pkg0": zone(root, "intel-rapl:0", "package-0", MAX_UJ - 5_000_000),
        "core": zone(root, "intel-rapl:0:0", "core", 1_000),  # inside package-0: not added
        "psys": zone(root, "intel-rapl:1", "psys", 7_000),  # overlaps packages: not added
        "pkg1": zone(root, "intel-rapl:2", "package-1", 10_000_000),
    }
    return root, files


def test_wraparound(powercap):
    root, f = powercap
    meter = RaplMeter(root)
    assert meter.unavailable_reason is None
    meter.begin()
    f["pkg0"].write_text("3000000\n")  # wrapped: 5 J to the top + 3 J
    f["pkg1"].write_text("12000000\n")  # +2 J
    f["core"].write_text("999999999\n")
    assert meter.end() == (pytest.approx(10.0), None)


def test_polling_catches_more_than_one_wrap(powercap):
    root, f = powercap
    meter = RaplMeter(root)
    meter.begin()
    for value in (MAX_UJ // 2, 1_000_000, MAX_UJ // 2):  # two wraps in one window
        f["pkg0"].write_text(f"{value}\n")
        meter.poll()
    joules, _ = meter.end()
    expected_uj = 5_000_000 + MAX_UJ + MAX_UJ // 2
    assert joules == pytest.approx(expected_uj / 1e6)


def test_no_powercap_files(tmp_path):
    meter = RaplMeter(tmp_path / "nothing")
    reason = f"no RAPL powercap files ({tmp_path}/nothing/intel-rapl:*/energy_uj)"
    assert meter.end() == (None, reason)


def test_unreadable_counter(tmp_path):
    root = tmp_path / "pc"
    zone(root, "intel-rapl:0", "package-0", 1)
    (root / "intel-rapl:0" / "energy_uj").unlink()
    (root / "intel-rapl:0" / "energy_uj").mkdir()  # reading it fails like a root-only file
    reason = RaplMeter(root).unavailable_reason
    assert reason.startswith("RAPL package counters not readable") and "root" in reason


def test_session_reports_cpu_energy(powercap, make_session, clock):
    root, f = powercap
    s = make_session(
        make_cfg(energy=EnergySource.auto), device_type="cpu", indices=None, powercap_root=root
    )
    s.start()
    with s.window():
        f["pkg0"].write_text("1000000\n")  # wrapped: 5 J + 1 J
        clock.sleep(0.5)  # the sampler polls in between
        f["pkg0"].write_text("2000000\n")  # +1 J
        f["pkg1"].write_text("13000000\n")  # +3 J
        clock.sleep(0.5)
    e = s.measurement(output_tokens=1, requests=1).energy
    assert (e.cpu_source, e.cpu_unavailable_reason) == ("rapl", None)
    assert e.cpu_package_j == pytest.approx(10.0)
