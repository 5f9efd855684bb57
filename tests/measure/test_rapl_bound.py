"""What llem can bound of a RAPL figure (resolution, update period, reads beyond the window's
edges) on planted windows, and what it cannot (the counters' accuracy, which no vendor states)."""

from __future__ import annotations

import pytest

from llem.devices.cpu_energy import CpuEnergy, DomainEnergy, RaplReader
from llem.measure.rapl_bound import NO_ACCURACY, limits_text, reading_limits_j
from llem.testing.planted_rapl import ScriptedCounters, plant_zone

UNIT_J = 2.0**-14  # the coarsest RAPL energy unit, 61.0 uJ


def _cpu(duration_s: float, last_read_s: float, *domains: DomainEnergy) -> CpuEnergy:
    return CpuEnergy(duration_s, domains, None, last_read_s, 500.0)


def test_each_counter_read_adds_its_resolution_update_and_edge_limits():
    """Two Intel dies summed into package-0 (2 counters) and dram-0 (1): reads 2 ms before the
    window and 1 ms after it, the last read taking 0.5 ms, at up to 500 W."""
    cpu = _cpu(
        2.003,
        0.0005,
        DomainEnergy("package-0", 80.0, None, ("a", "b"), "sum of 2 dies", 2),
        DomainEnergy("dram-0", 10.0, None, ("c",)),
    )
    limits, why = reading_limits_j(cpu, ("package", "dram"), 2.0)
    assert why is None and limits is not None
    assert limits["resolution_j"] == pytest.approx(3 * 2 * (UNIT_J + 1e-6))
    assert limits["update_j"] == pytest.approx(3 * 2 * 0.001 * 500.0)  # 3 J
    assert limits["edges_j"] == pytest.approx(3 * 500.0 * 0.0035)  # 5.25 J
    only_packages, _ = reading_limits_j(cpu, ("package",), 2.0)
    assert only_packages is not None and only_packages["update_j"] == pytest.approx(2.0)


def test_a_socket_counter_listed_per_die_is_one_counter():
    cpu = _cpu(2.0, 0.0, DomainEnergy("package-0", 50.0, None, ("a", "b"), "counted once", 1))
    limits, _ = reading_limits_j(cpu, ("package",), 2.0)
    assert limits is not None and limits["update_j"] == pytest.approx(1.0)
    assert limits["edges_j"] == 0.0


def test_an_unread_domain_leaves_the_limits_null_with_its_reason():
    cpu = _cpu(2.0, 0.0, DomainEnergy("package-0", None, "permission denied", ("a",)))
    assert reading_limits_j(cpu, ("package",), 2.0) == (None, "package-0: permission denied")
    gone = CpuEnergy(2.0, (), "no RAPL on this machine")
    assert reading_limits_j(gone, ("package",), 2.0) == (None, "no RAPL on this machine")


def test_the_words_say_the_limits_are_no_bound():
    text = limits_text({"resolution_j": 0.000248, "update_j": 2.0, "edges_j": 0.0})
    assert text.startswith("RAPL's reading limits +/- 2 J") and "leave its error out" in text
    assert NO_ACCURACY.startswith("RAPL states no accuracy")


def test_a_snapshot_records_how_long_its_reads_took(tmp_path):
    """Each read of the planted clock moves it 1 ms: a snapshot of two zones is stamped before
    its reads and records the 2 ms they took (the third tick is its own stamp)."""
    root = tmp_path / "pc"
    pkg = plant_zone(root, "intel-rapl:0", "package-0", 0)
    dram = plant_zone(root, "intel-rapl:0:0", "dram", 0)
    now = [100.0]

    def clock() -> float:
        return now[0]

    counters = ScriptedCounters({pkg: [1_000], dram: [2_000]})

    def read(path):
        if path in (pkg, dram):
            now[0] += 0.001
        return counters(path)

    reader = RaplReader(root, read_text=read, clock=clock)
    first = reader.snapshot()
    assert first.t_s == 100.0 and first.read_s == pytest.approx(0.002)
    assert reader.energy(first, reader.snapshot()).last_read_s == pytest.approx(0.002)
