"""Pre-flight of ``measurement.boundary=node``: a node of which no part can be read is refused
before anything loads, naming each part and why, and what to set instead; one of which only part
can be read is a warning; ``boundary=gpu`` is never refused for what it cannot read. GPUs are the
fake NVML's (or none: no NVML at all), RAPL a planted powercap tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from llem.config.schema import BoundaryKind, EnergySource
from llem.devices.cpu_energy import RaplReader
from llem.devices.powercap import RAPL_PERMISSION_HINT
from llem.result import RunResult
from llem.runner.summary import boundary_line
from llem.testing.fake_pynvml import FakeGpu
from llem.testing.planted_rapl import PoweredCounters, ScriptedCounters, plant_zone

from .conftest import make_cfg

NODE = dict(energy=EnergySource.auto, boundary=BoundaryKind.node)
NO_NVML_CPU = "no NVIDIA GPU/NVML (NVMLError_LibraryNotFound)"  # as a CPU run's energy says
GPU_INSTEAD = (
    "leave measurement.boundary at gpu (the default: a run whose energy cannot be read still "
    "measures its time, and says why)"
)


def _no_rapl(tmp_path: Path) -> str:
    return f"no RAPL on this machine: {tmp_path / 'no-powercap'} has no intel-rapl zones"


def _refusal(parts: str, instead: str = GPU_INSTEAD) -> str:
    return (
        f"measurement.boundary=node: no part of the node can be read here ({parts}), so the run "
        f"would end with no energy at all; {instead}"
    )


def _planted(tmp_path: Path, dram: bool = True, script=None) -> tuple[RaplReader, ScriptedCounters]:
    """One package (and its DRAM) whose counters read 5 J, or each read's ``script``."""
    root = tmp_path / "powercap"
    files = [plant_zone(root, "intel-rapl:0", "package-0", 5_000_000)]
    if dram:
        files.append(plant_zone(root, "intel-rapl:0:0", "dram", 5_000_000))
    counters = ScriptedCounters({f: script or [5_000_000] for f in files})
    return RaplReader(root, read_text=counters), counters


def test_a_cpu_run_on_a_machine_without_nvml_or_rapl_is_refused(make_session, tmp_path) -> None:
    s = make_session(make_cfg(**NODE), indices=None, device_type="cpu")
    parts = f"GPUs: {NO_NVML_CPU}; CPU packages and DRAM: {_no_rapl(tmp_path)}"
    assert s.preflight() == [_refusal(parts)]
    assert s.preflight_warnings == []


def test_a_gpu_run_whose_nvml_is_missing_is_refused_with_each_parts_reason(
    make_session, tmp_path
) -> None:
    s = make_session(make_cfg(**NODE))
    parts = (
        "GPUs: NVML is not available (NVMLError_LibraryNotFound); "
        f"CPU packages and DRAM: {_no_rapl(tmp_path)}"
    )
    assert s.preflight() == [_refusal(parts)]


def test_root_only_counters_are_read_once_and_refused_with_how_to_read_them(
    make_session, tmp_path
) -> None:
    rapl, counters = _planted(tmp_path, script=[PermissionError(13, "Permission denied")])
    s = make_session(make_cfg(**NODE), indices=None, device_type="cpu", rapl=rapl)
    zone = tmp_path / "powercap"
    parts = (
        f"GPUs: {NO_NVML_CPU}; "
        f"CPU packages: package-0: permission denied reading {zone}/intel-rapl:0/energy_uj; "
        f"DRAM: dram-0: permission denied reading {zone}/intel-rapl:0:0/energy_uj"
    )
    instead = f"{GPU_INSTEAD}; or make RAPL readable ({RAPL_PERMISSION_HINT})"
    assert s.preflight() == [_refusal(parts, instead)]
    assert sorted(counters.reads.values()) == [1, 1]  # each counter read once, as the run will


def test_energy_none_reads_no_part_of_a_node(make_session, install_nvml, tmp_path) -> None:
    install_nvml([FakeGpu("GPU-a")])
    rapl, counters = _planted(tmp_path)
    s = make_session(make_cfg(energy=EnergySource.none, boundary=BoundaryKind.node), rapl=rapl)
    instead = f"{GPU_INSTEAD}; or set measurement.energy=auto to measure the node"
    parts = "GPUs, CPU packages and DRAM: disabled by measurement.energy=none"
    assert s.preflight() == [_refusal(parts, instead)]
    assert set(counters.reads.values()) == {0}


def test_a_host_whose_meters_are_not_the_runs_reads_no_part_of_a_node(
    make_session, install_nvml, tmp_path
) -> None:
    install_nvml([FakeGpu("GPU-a")])
    rapl, counters = _planted(tmp_path)
    why = "planted: the server runs on another host"
    s = make_session(make_cfg(**NODE), rapl=rapl, energy_refused=why)
    assert s.preflight() == [_refusal(f"GPUs, CPU packages and DRAM: {why}")]
    assert set(counters.reads.values()) == {0}


def test_gpus_without_rapl_are_a_warning_and_the_run_goes_on(
    make_session, install_nvml, tmp_path
) -> None:
    install_nvml([FakeGpu("GPU-a")])
    s = make_session(make_cfg(**NODE))
    assert s.preflight() == []
    assert s.preflight_warnings == [
        "measurement.boundary=node: part of the node cannot be read (CPU packages and DRAM: "
        f"{_no_rapl(tmp_path)}), so the node's total_j will be null; GPUs keep their own figures"
    ]


def test_a_root_only_package_beside_read_gpus_is_a_warning_with_how_to_read_it(
    make_session, install_nvml, tmp_path
) -> None:
    install_nvml([FakeGpu("GPU-a")])
    rapl, _ = _planted(tmp_path, dram=False, script=[PermissionError(13, "Permission denied")])
    s = make_session(make_cfg(**NODE), rapl=rapl)
    assert s.preflight() == []
    zone = tmp_path / "powercap" / "intel-rapl:0" / "energy_uj"
    assert s.preflight_warnings == [
        "measurement.boundary=node: part of the node cannot be read (CPU packages: package-0: "
        f"permission denied reading {zone}), so the node's total_j will be null; GPUs keep "
        f"their own figures; make RAPL readable ({RAPL_PERMISSION_HINT})"
    ]


def test_rapl_on_a_cpu_run_on_a_host_without_gpus_is_not_warned(make_session, tmp_path) -> None:
    """No vendor library starts: the GPUs are outside, as the run's boundary.outside says."""
    rapl, _ = _planted(tmp_path)
    s = make_session(make_cfg(**NODE), indices=None, device_type="cpu", rapl=rapl)
    assert s.preflight() == [] and s.preflight_warnings == []


def test_rapl_on_a_cpu_run_beside_a_visible_gpu_is_a_warning_naming_the_gpus(
    make_session, install_nvml, tmp_path
) -> None:
    install_nvml([FakeGpu("GPU-a")])
    rapl, _ = _planted(tmp_path)
    s = make_session(make_cfg(**NODE), indices=None, device_type="cpu", rapl=rapl)
    assert s.preflight() == []
    assert s.preflight_warnings == [
        "measurement.boundary=node: part of the node cannot be read (GPUs: the run is on "
        "device=cpu, not on a GPU), so the node's total_j will be null; CPU packages and DRAM "
        "keep their own figures"
    ]


def _cpu_run(make_session, clock, tmp_path, dram_w: float = 6.0):
    """A CPU run's node window: 40 W of package and ``dram_w`` of DRAM planted for 2 s, 10
    output tokens."""
    root = tmp_path / "powercap"
    pkg = plant_zone(root, "intel-rapl:0", "package-0", 0)
    dram = plant_zone(root, "intel-rapl:0:0", "dram", 0)
    counters = PoweredCounters([pkg, dram], clock.now)
    counters.set_power_w(pkg, 40.0)
    counters.set_power_w(dram, dram_w)
    rapl = RaplReader(root, read_text=counters, clock=clock.now)
    s = make_session(make_cfg(**NODE), indices=None, device_type="cpu", rapl=rapl)
    assert s.preflight() == []
    s.start()
    with s.window():
        clock.sleep(2.0)
    return s, s.measurement(output_tokens=10, requests=1)


def test_a_cpu_run_without_gpus_has_a_node_total_of_its_packages_and_dram(
    make_session, clock, tmp_path
) -> None:
    """What the absent warning promises, on a window: 80 J of package and 12 J of DRAM."""
    s, m = _cpu_run(make_session, clock, tmp_path)
    b = m.boundary
    assert s.preflight_warnings == []
    assert b.cpu_package_j == pytest.approx(80.0) and b.dram_j == pytest.approx(12.0)
    assert b.total_j == pytest.approx(92.0, abs=1e-9)
    assert b.j_per_output_token == pytest.approx(9.2, abs=1e-9)
    assert (
        b.gpu_j is None
        and b.gpus == []
        and b.includes == ["this host's RAPL domains package-0, dram-0"]
    )
    why = "no GPU is visible to NVML or amdsmi (NVMLError_LibraryNotFound)"
    assert m.null_reasons["boundary.gpu_j"] == f"outside the boundary: {why}"
    assert b.outside[-1] == (
        f"this host's GPUs: the run uses none and {why}; the power of a GPU present without a "
        "working driver, if any, is not in the total"
    )
    assert b.total_j_uncertainty is None and b.rapl_reading_limits_j is not None
    bound_why = m.null_reasons["boundary.total_j_uncertainty"]
    assert bound_why.startswith("cpu_package and dram hold RAPL energy: RAPL states no accuracy")
    assert "RAPL's reading limits +/- " in bound_why and "gpu" not in bound_why
    result = RunResult(status="ok", boundary=b)
    result.null_reasons.update(m.null_reasons)
    assert boundary_line(result) == (
        f"boundary: node = GPUs: outside the boundary: {why} + CPU packages 80.0 J + DRAM 12.0 J "
        "= 92.0 J, 9.2 J/token (no bound: RAPL states no accuracy; see null_reasons)"
    )


def test_a_cpu_run_measures_its_cpus_idle_power_and_the_node_net_of_it(
    make_session, clock, tmp_path
) -> None:
    """RAPL alone (no GPU): the idle baseline is the packages' and DRAM's, measured once per
    process before the model loads. Planted: 10 W and 2 W idle for 2 s, then 40 W and 6 W over a
    2 s window: 60 J and 8 J above idle (it was null: only a GPU source had an idle baseline)."""
    root = tmp_path / "powercap"
    pkg = plant_zone(root, "intel-rapl:0", "package-0", 0)
    dram = plant_zone(root, "intel-rapl:0:0", "dram", 0)
    counters = PoweredCounters([pkg, dram], clock.now)
    rapl = RaplReader(root, read_text=counters, clock=clock.now)
    cfg = make_cfg(**NODE, idle_baseline_s=2.0)

    def run(idle_w: tuple[float, float], busy_w: tuple[float, float]):
        counters.set_power_w(pkg, idle_w[0])
        counters.set_power_w(dram, idle_w[1])
        s = make_session(cfg, indices=None, device_type="cpu", rapl=rapl)
        s.start()
        counters.set_power_w(pkg, busy_w[0])
        counters.set_power_w(dram, busy_w[1])
        with s.window():
            clock.sleep(2.0)
        return s.measurement(output_tokens=10, requests=1)

    m = run((10.0, 2.0), (40.0, 6.0))
    b = m.boundary
    assert b.cpu_package_j == pytest.approx(80.0) and b.dram_j == pytest.approx(12.0)
    assert b.cpu_package_idle_adjusted_j == pytest.approx(60.0)
    assert b.dram_idle_adjusted_j == pytest.approx(8.0)
    assert b.idle_adjusted_j == pytest.approx(68.0)
    assert m.energy.idle_source == "measured_this_run" and m.energy.idle_power_w is None
    # the process's second run reuses the baseline: a hotter idle now is not measured
    again = run((30.0, 5.0), (40.0, 6.0))
    assert again.boundary.cpu_package_idle_adjusted_j == pytest.approx(60.0)
    assert again.energy.idle_source == "reused_from_process"


def test_a_cpu_run_beside_a_visible_gpu_has_no_node_total(
    make_session, install_nvml, clock, tmp_path
) -> None:
    """The warning's 'total_j will be null' and 'keep their own figures', on a window."""
    install_nvml([FakeGpu("GPU-a")])
    s, m = _cpu_run(make_session, clock, tmp_path)
    b = m.boundary
    assert len(s.preflight_warnings) == 1
    assert b.total_j is None and b.gpu_j is None and b.j_per_output_token is None
    assert b.cpu_package_j == pytest.approx(80.0) and b.dram_j == pytest.approx(12.0)
    assert "device=cpu, not on a GPU" in m.null_reasons["boundary.total_j"]


def test_a_cpu_run_where_nvml_starts_but_lists_no_gpu_has_a_node_total(
    make_session, install_nvml, clock, tmp_path
) -> None:
    """A driver without a GPU (NVML starts, 0 devices) is a host without GPUs: no warning, and the
    node is its packages and DRAM (it was null, as beside a GPU the run does not use)."""
    install_nvml([])
    s, m = _cpu_run(make_session, clock, tmp_path)
    b = m.boundary
    assert s.preflight_warnings == []
    assert b.total_j == pytest.approx(92.0, abs=1e-9) and b.gpu_j is None
    why = "no GPU is visible to NVML (it lists none)"
    assert m.null_reasons["boundary.gpu_j"] == f"outside the boundary: {why}"
    assert b.outside[-1].startswith(f"this host's GPUs: the run uses none and {why}")


def test_no_gpu_visible_under_cuda_visible_devices_is_a_part_not_read(
    make_session, install_nvml, tmp_path
) -> None:
    install_nvml([FakeGpu("GPU-a")])
    rapl, _ = _planted(tmp_path)
    s = make_session(make_cfg(**NODE), indices=None, env={"CUDA_VISIBLE_DEVICES": ""}, rapl=rapl)
    assert s.preflight() == []
    (warning,) = s.preflight_warnings
    assert "(GPUs: no GPU is visible (CUDA_VISIBLE_DEVICES is ''))" in warning


def test_a_cpu_without_a_dram_domain_has_its_dram_outside_not_unread(
    make_session, install_nvml, tmp_path
) -> None:
    install_nvml([FakeGpu("GPU-a")])
    rapl, _ = _planted(tmp_path, dram=False)
    s = make_session(make_cfg(**NODE), rapl=rapl)
    assert s.preflight() == [] and s.preflight_warnings == []


@pytest.mark.parametrize("device_type", ["cpu", "cuda"])
def test_the_gpu_boundary_is_never_refused_for_what_it_cannot_read(
    make_session, tmp_path, device_type
) -> None:
    cfg = make_cfg(energy=EnergySource.auto, boundary=BoundaryKind.gpu)
    s = make_session(cfg, indices=None, device_type=device_type)
    assert s.preflight() == [] and s.preflight_warnings == []
