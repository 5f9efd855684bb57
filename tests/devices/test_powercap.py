"""RAPL through a planted powercap tree: which zones are read, the energy of each domain, its
reasons when null, and which packages the process may run on. Every expected number is planted
by the test (counter values written to the files), never recomputed by the code under test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from llem.devices.cpu_affinity import package_coverage, process_packages
from llem.devices.cpu_energy import RaplReader, energy_over, max_read_interval_s
from llem.devices.powercap import discover, read_file_text, take_snapshot
from llem.devices.rapl_scope import counter_scope, vendor_id
from llem.testing.planted_rapl import ScriptedCounters, plant_cpuinfo

MAX_UJ = 262_143_328_850  # a common package range (about 262 kJ)
DRAM_MAX_UJ = 65_712_999_613  # a common server DRAM range (about 65.7 kJ)


def plant(root: Path, folder: str, name: str, energy_uj: int, max_uj: int | None = MAX_UJ) -> Path:
    zone = root / folder
    zone.mkdir(parents=True)
    (zone / "name").write_text(name + "\n")
    (zone / "energy_uj").write_text(f"{energy_uj}\n")
    if max_uj is not None:
        (zone / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return zone / "energy_uj"


class Clock:
    def __init__(self) -> None:
        self.t_s = 100.0

    def __call__(self) -> float:
        return self.t_s


@pytest.fixture
def server(tmp_path: Path) -> tuple[Path, dict[str, Path]]:
    """Two packages with DRAM, a core sub-zone, psys, and package-0 listed again through MMIO."""
    root = tmp_path / "powercap"
    (root / "intel-rapl").mkdir(parents=True)  # the control type itself: not a zone
    files = {
        "pkg0": plant(root, "intel-rapl:0", "package-0", 1_000_000),
        "core0": plant(root, "intel-rapl:0:0", "core", 5),
        "dram0": plant(root, "intel-rapl:0:1", "dram", 2_000_000, DRAM_MAX_UJ),
        "pkg1": plant(root, "intel-rapl:1", "package-1", MAX_UJ - 1_500_000),
        "dram1": plant(root, "intel-rapl:1:0", "dram", 7_000_000, DRAM_MAX_UJ),
        "psys": plant(root, "intel-rapl:2", "psys", 100),
        "mmio0": plant(root, "intel-rapl-mmio:0", "package-0", 1_000_050),
    }
    return root, files


def test_discovery_reads_packages_and_dram_and_says_why_others_are_left_out(server):
    root, _ = server
    found = discover(root)
    assert found.unavailable_reason is None
    assert [(z.name, z.domain, z.path.name) for z in found.zones] == [
        ("package-0", "package-0", "intel-rapl:0"),
        ("dram", "dram-0", "intel-rapl:0:1"),
        ("package-1", "package-1", "intel-rapl:1"),
        ("dram", "dram-1", "intel-rapl:1:0"),
    ]
    assert [z.max_energy_range_uj for z in found.zones] == [
        MAX_UJ,
        DRAM_MAX_UJ,
        MAX_UJ,
        DRAM_MAX_UJ,
    ]
    assert found.zones[0].energy_uj_path == root / "intel-rapl:0" / "energy_uj"
    assert found.packages == (0, 1)
    skipped = {s.zone.path.name: s.why for s in found.skipped}
    assert set(skipped) == {"intel-rapl:0:0", "intel-rapl:2", "intel-rapl-mmio:0"}
    assert "inside package-0" in skipped["intel-rapl:0:0"]
    assert "already contains the packages" in skipped["intel-rapl:2"]
    assert "MSR zone (intel-rapl) read instead" in skipped["intel-rapl-mmio:0"]


def test_mmio_sub_zones_of_a_package_read_through_msr_are_left_out(server):
    root, _ = server
    plant(root, "intel-rapl-mmio:0:0", "dram", 3, DRAM_MAX_UJ)
    found = discover(root)
    assert [z.domain for z in found.zones] == ["package-0", "dram-0", "package-1", "dram-1"]
    assert all(z.interface == "msr" for z in found.zones)
    skipped = {s.zone.path.name: s.why for s in found.skipped}
    assert skipped["intel-rapl-mmio:0:0"].startswith("dram of package-0 again")


def test_energy_per_domain_with_a_wrap_psys_core_and_mmio_not_added(server):
    root, f = server
    clock = Clock()
    reader = RaplReader(root, clock=clock)
    start = reader.snapshot()
    f["pkg0"].write_text("31000000\n")  # +30 J
    f["dram0"].write_text("6500000\n")  # +4.5 J
    f["pkg1"].write_text("2500000\n")  # wrapped: 1.5 J to the top, then 2.5 J: 4 J
    f["dram1"].write_text("7250000\n")  # +0.25 J
    for name in ("psys", "core0", "mmio0"):  # would swamp the totals if added
        f[name].write_text("900000000000\n")
    clock.t_s += 10.0
    result = reader.energy(start, reader.snapshot())
    assert result.duration_s == 10.0
    assert {d.domain: d.value_j for d in result.domains} == {
        "package-0": pytest.approx(30.0),
        "dram-0": pytest.approx(4.5),
        "package-1": pytest.approx(4.0),
        "dram-1": pytest.approx(0.25),
    }
    assert all(d.reason is None for d in result.domains)
    assert result.total("package").value_j == pytest.approx(34.0)
    assert result.total("dram").value_j == pytest.approx(4.75)


def test_mmio_zone_is_read_when_it_is_the_only_one(tmp_path):
    root = tmp_path / "pc"
    counter = plant(root, "intel-rapl-mmio:0", "package-0", 0)
    found = discover(root)
    assert [(z.domain, z.interface) for z in found.zones] == [("package-0", "mmio")]
    start = take_snapshot(found)
    counter.write_text("1250000\n")
    assert energy_over((start, take_snapshot(found))).domains[0].value_j == pytest.approx(1.25)


def test_psys_alone_is_not_taken_for_a_package(tmp_path):
    root = tmp_path / "pc"
    plant(root, "intel-rapl:0", "psys", 10)
    found = discover(root)
    assert found.zones == ()
    assert found.unavailable_reason == f"no RAPL package or DRAM zone under {root}"


def test_permission_denied_is_null_with_the_reason(server):
    """Root reads a chmod 000 file anyway, so the refusal is planted through the reader's opener:
    it raises PermissionError for package-1's counter, as a non-root read does since Linux 5.10."""
    root, _ = server
    denied = root / "intel-rapl:1" / "energy_uj"

    def read_text(path: Path) -> str:
        if path == denied:
            raise PermissionError(13, "Permission denied", str(path))
        return read_file_text(path)

    reader = RaplReader(root, read_text=read_text)
    result = reader.energy(reader.snapshot(), reader.snapshot())
    pkg1 = next(d for d in result.domains if d.domain == "package-1")
    assert pkg1.value_j is None
    assert pkg1.reason.startswith(f"permission denied reading {denied}")
    assert "root only since Linux 5.10" in pkg1.reason and "run as root" in pkg1.reason
    assert next(d for d in result.domains if d.domain == "package-0").value_j == 0.0
    packages = result.total("package")
    assert packages.value_j is None and packages.reason.startswith("package-1: permission denied")


def test_unreadable_counter_file_is_null_with_the_reason(server):
    """energy_uj made a directory: reading it fails (IsADirectoryError) even as root."""
    root, _ = server
    counter = root / "intel-rapl:0:1" / "energy_uj"
    counter.unlink()
    counter.mkdir()
    reader = RaplReader(root)
    dram0 = reader.energy(reader.snapshot(), reader.snapshot()).domains[1]
    assert (dram0.domain, dram0.value_j) == ("dram-0", None)
    assert dram0.reason == f"{counter} could not be read: Is a directory"


def test_no_powercap_tree(tmp_path):
    root = tmp_path / "no-powercap"
    reason = f"no RAPL on this machine: {root} has no intel-rapl zones"
    reader = RaplReader(root)
    assert reader.discovery.unavailable_reason == reason
    result = reader.energy(reader.snapshot(), reader.snapshot())
    assert result.domains == ()
    assert result.total("package").value_j is None
    assert result.total("package").reason == reason
    assert result.total("dram").reason == reason
    assert reader.max_read_interval_s() is None


def test_counter_vanishing_mid_window_makes_only_its_domain_null(server):
    root, f = server
    reader = RaplReader(root)
    start = reader.snapshot()
    f["pkg0"].write_text("3000000\n")  # +2 J
    f["pkg1"].unlink()
    result = reader.energy(start, reader.snapshot())
    by = {d.domain: d for d in result.domains}
    assert by["package-0"].value_j == pytest.approx(2.0)
    assert by["package-1"].value_j is None
    assert by["package-1"].reason == (
        f"counter failed during the window (read 2 of 2): {f['pkg1']} is gone (the zone vanished)"
    )


def test_amd_naming_packages_with_core_subzones_and_no_dram(tmp_path):
    """AMD since Linux 5.11: intel_rapl_msr names sockets package-N, each with a core sub-zone."""
    root = tmp_path / "pc"
    pkg0 = plant(root, "intel-rapl:0", "package-0", 40_000_000)
    core0 = plant(root, "intel-rapl:0:0", "core", 1_000)
    pkg1 = plant(root, "intel-rapl:1", "package-1", 9_000_000)
    plant(root, "intel-rapl:1:0", "core", 2_000)
    reader = RaplReader(root)
    start = reader.snapshot()
    pkg0.write_text("52000000\n")  # +12 J
    pkg1.write_text("9500000\n")  # +0.5 J
    core0.write_text("8000000000\n")
    result = reader.energy(start, reader.snapshot())
    assert [(d.domain, d.value_j) for d in result.domains] == [
        ("package-0", pytest.approx(12.0)),
        ("package-1", pytest.approx(0.5)),
    ]
    assert result.total("package").value_j == pytest.approx(12.5)
    dram = result.total("dram")
    assert dram.value_j is None and "no DRAM domain (AMD" in dram.reason


def test_amd_multi_die_mirrored_counter_is_counted_once(tmp_path):
    """Threadripper/EPYC Zen 1/2: package-0-die-0 and -die-1 mirror one socket counter."""
    root = tmp_path / "pc"
    dies = [plant(root, f"intel-rapl:{i}", f"package-0-die-{i}", 5_000_000) for i in (0, 1)]
    reader = RaplReader(root, cpuinfo=plant_cpuinfo(tmp_path / "cpuinfo", "AuthenticAMD"))
    start = reader.snapshot()
    for die in dies:
        die.write_text("68000000\n")  # one counter: +63 J, seen twice
    (pkg0,) = reader.energy(start, reader.snapshot()).domains
    assert (pkg0.domain, pkg0.value_j) == ("package-0", pytest.approx(63.0))
    assert "counted once, through package-0-die-0" in pkg0.note and len(pkg0.zones) == 2


@pytest.mark.parametrize(
    "tick_uj",
    [
        15,  # one energy-status unit (15.3 uJ) later
        50_000,  # one 1 ms update later at the socket's 50 W
    ],
)
def test_an_amd_socket_listed_per_die_is_counted_once_when_a_read_straddles_a_tick(
    tmp_path, tick_uj
):
    """The dies' zones are read one after the other and the socket counter moves about every
    millisecond: at the window's start die-1's read lands one tick after die-0's. The socket
    drew 50 J; deciding from exact equality, the two zones looked like two counters and the
    package came out 100 J less a tick."""
    root = tmp_path / "pc"
    die0 = plant(root, "intel-rapl:0", "package-0-die-0", 0)
    die1 = plant(root, "intel-rapl:1", "package-0-die-1", 0)
    counters = ScriptedCounters(
        {die0: [5_000_000, 55_000_000], die1: [5_000_000 + tick_uj, 55_000_000]}
    )
    cpuinfo = plant_cpuinfo(tmp_path / "cpuinfo", "AuthenticAMD")
    reader = RaplReader(root, read_text=counters, cpuinfo=cpuinfo)
    (pkg0,) = reader.energy(reader.snapshot(), reader.snapshot()).domains
    assert pkg0.value_j == pytest.approx(50.0)  # 100 J - tick before
    assert reader.scope is not None and reader.scope.per == "package"


@pytest.mark.parametrize("die1_offset_uj", [0, 20])
def test_intel_dies_are_summed_even_when_their_readings_agree(tmp_path, die1_offset_uj):
    """Cascade Lake-AP: each die has its own counter. Two dies drawing 25 J each whose counters
    read alike (at every read, or within 20 uJ) are two counters: the package drew 50 J (25 J
    when identical readings were taken for one counter)."""
    root = tmp_path / "pc"
    die0 = plant(root, "intel-rapl:0", "package-0-die-0", 0)
    die1 = plant(root, "intel-rapl:1", "package-0-die-1", 0)
    start1, end1 = 7_000_000 + die1_offset_uj, 32_000_000 + die1_offset_uj
    counters = ScriptedCounters({die0: [7_000_000, 32_000_000], die1: [start1, end1]})
    cpuinfo = plant_cpuinfo(tmp_path / "cpuinfo", "GenuineIntel")
    reader = RaplReader(root, read_text=counters, cpuinfo=cpuinfo)
    (pkg0,) = reader.energy(reader.snapshot(), reader.snapshot()).domains
    assert pkg0.value_j == pytest.approx(50.0)
    assert pkg0.note == "sum of 2 dies (GenuineIntel: each die has its own counter)"


def test_dies_with_their_own_counters_are_summed(tmp_path):
    root = tmp_path / "pc"
    die0 = plant(root, "intel-rapl:0", "package-0-die-0", 1_000_000)
    die1 = plant(root, "intel-rapl:1", "package-0-die-1", 3_000_000)
    reader = RaplReader(root, cpuinfo=plant_cpuinfo(tmp_path / "cpuinfo", "GenuineIntel"))
    start = reader.snapshot()
    die0.write_text("4000000\n")  # +3 J
    die1.write_text("4000000\n")  # +1 J
    (pkg0,) = reader.energy(start, reader.snapshot()).domains
    assert pkg0.value_j == pytest.approx(4.0) and pkg0.note.startswith("sum of 2 dies")


@pytest.mark.parametrize("vendor", [None, "CentaurHauls"])
def test_dies_of_an_unknown_vendor_are_null_with_the_reason(tmp_path, vendor):
    root = tmp_path / "pc"
    dies = [plant(root, f"intel-rapl:{i}", f"package-0-die-{i}", 1_000_000) for i in (0, 1)]
    plant(root, "intel-rapl:2", "package-1", 1_000_000)
    reader = RaplReader(root, cpuinfo=plant_cpuinfo(tmp_path / "cpuinfo", vendor))
    start = reader.snapshot()
    for die in dies:
        die.write_text("4000000\n")
    pkg0, pkg1 = reader.energy(start, reader.snapshot()).domains
    assert pkg0.value_j is None and "2 dies (package-0-die-0, package-0-die-1)" in pkg0.reason
    assert "neither summed nor counted once" in pkg0.reason
    assert pkg1.value_j == 0.0  # a package of one zone needs no vendor


def test_no_die_zones_leave_cpuinfo_unread(tmp_path):
    root = tmp_path / "pc"
    plant(root, "intel-rapl:0", "package-0", 1_000_000)
    assert RaplReader(root, cpuinfo=tmp_path / "absent").scope is None


def test_the_vendor_is_read_from_cpuinfo(tmp_path):
    assert vendor_id(plant_cpuinfo(tmp_path / "a", "HygonGenuine")) == "HygonGenuine"
    assert vendor_id(plant_cpuinfo(tmp_path / "b", None)) is None
    assert vendor_id(tmp_path / "absent") is None
    assert counter_scope(plant_cpuinfo(tmp_path / "c", "HygonGenuine")).per == "package"


def test_read_interval_from_range_and_power():
    assert max_read_interval_s(MAX_UJ, 500.0) == pytest.approx(524.2866577)
    assert max_read_interval_s(DRAM_MAX_UJ, 500.0) == pytest.approx(131.425999226)
    assert max_read_interval_s(MAX_UJ, 100.0) == pytest.approx(2621.4332885)
    with pytest.raises(ValueError):
        max_read_interval_s(MAX_UJ, 0.0)


def test_reader_says_how_often_to_read(server):
    root, _ = server
    assert RaplReader(root).max_read_interval_s() == pytest.approx(131.425999226)  # DRAM's range
    assert RaplReader(root, max_power_w=250.0).max_read_interval_s() == pytest.approx(262.851998452)


def test_step_longer_than_one_wrap_period_is_null(tmp_path):
    root = tmp_path / "pc"
    counter = plant(root, "intel-rapl:0", "package-0", 1_000_000)
    clock = Clock()
    reader = RaplReader(root, clock=clock)
    start = reader.snapshot()
    counter.write_text("2000000\n")
    clock.t_s += 600.0  # past the 524 s in which the counter can wrap at 500 W
    end = reader.snapshot()
    (pkg0,) = reader.energy(start, end).domains
    assert pkg0.value_j is None
    assert "600 s between two reads" in pkg0.reason and "524 s" in pkg0.reason
    # with no stated power limit the check is off and the one-wrap figure is given
    assert energy_over((start, end), max_power_w=None).domains[0].value_j == pytest.approx(1.0)


def test_reads_in_between_undo_one_wrap_each(tmp_path):
    root = tmp_path / "pc"
    counter = plant(root, "intel-rapl:0", "package-0", MAX_UJ - 5_000_000)
    clock = Clock()
    reader = RaplReader(root, clock=clock)
    snaps = [reader.snapshot()]
    for value in (MAX_UJ // 2, 1_000_000, MAX_UJ // 2):  # two wraps in one window
        counter.write_text(f"{value}\n")
        clock.t_s += 100.0
        snaps.append(reader.snapshot())
    result = energy_over(snaps)
    expected_uj = 5_000_000 + MAX_UJ + MAX_UJ // 2  # planted: to the top, a full turn, half
    assert result.duration_s == 300.0
    assert result.domains[0].value_j == pytest.approx(expected_uj / 1e6)


def test_wrap_without_a_range_is_null(tmp_path):
    root = tmp_path / "pc"
    counter = plant(root, "intel-rapl:0", "package-0", 9_000_000, max_uj=None)
    reader = RaplReader(root)
    start = reader.snapshot()
    counter.write_text("1000000\n")
    (pkg0,) = reader.energy(start, reader.snapshot()).domains
    assert pkg0.value_j is None and "the wrap cannot be undone" in pkg0.reason


def test_energy_needs_two_snapshots(server):
    root, _ = server
    reader = RaplReader(root)
    with pytest.raises(ValueError, match="at least two snapshots"):
        reader.energy(reader.snapshot())


def plant_topology(cpu_root: Path, package_of: dict[int, int]) -> None:
    for cpu, package in package_of.items():
        topo = cpu_root / f"cpu{cpu}" / "topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text(f"{package}\n")


def test_process_pinned_to_one_package_of_two(tmp_path):
    cpu_root = tmp_path / "cpu"
    plant_topology(cpu_root, {0: 0, 1: 0, 2: 1, 3: 1})
    coverage = package_coverage((0, 1), cpu_root, cpus={0, 1})
    assert coverage.packages_of_process == (0,)
    assert coverage.packages_read == (0, 1)
    assert "may run on package(s) 0" in coverage.note
    assert "package(s) 1 read too" in coverage.note
    both = package_coverage((0, 1), cpu_root, cpus={1, 2})
    assert both.packages_of_process == (0, 1) and "read too" not in both.note


def test_process_packages_from_its_own_affinity(tmp_path):
    cpu_root = tmp_path / "cpu"
    mine = sorted(os.sched_getaffinity(0))
    plant_topology(cpu_root, {cpu: 7 for cpu in mine})  # planted: every CPU on package 7
    assert process_packages(cpu_root) == ((7,), None)


def test_process_packages_unknown_without_topology(tmp_path):
    coverage = package_coverage((0,), tmp_path / "no-cpu", cpus={0})
    assert coverage.packages_of_process is None
    assert str(tmp_path / "no-cpu" / "cpu0" / "topology" / "physical_package_id") in coverage.reason
    assert "unknown" in coverage.note
