"""The boundary section of a measured window: the GPUs alone (``measurement.boundary=gpu``) or the
node (the GPUs plus the host's RAPL packages and DRAM), each component idle-adjusted with its own
idle power. GPU power is planted in the fake NVML, CPU power in planted powercap counters that
integrate it on the session's virtual clock."""

from __future__ import annotations

import pytest

from llem.config.schema import BoundaryKind
from llem.devices.cpu_energy import RaplReader
from llem.measure.boundary_section import DRAM_OUTSIDE, NO_DRAM_DOMAIN, OUTSIDE_GPU
from llem.testing.fake_pynvml import FakeGpu, Step
from llem.testing.planted_rapl import PoweredCounters, ScriptedCounters, plant_zone

from .conftest import assert_nulls_explained, make_cfg

T0 = 1000.0  # the virtual clock's start
TOKENS = 100
# planted power (W): idle while the baseline is measured (T0 to T0 + 2 s), then busy
GPU_IDLE_W, GPU_BUSY_W = 60.0, 250.0
PKG_IDLE_W, PKG_BUSY_W = 20.0, 80.0
DRAM_IDLE_W, DRAM_BUSY_W = 5.0, 10.0
WINDOW_S = 2.0


@pytest.fixture
def node(tmp_path, install_nvml, clock):
    """A GPU, one package with its DRAM, and the package listed again through MMIO."""
    install_nvml([FakeGpu("GPU-a", power=Step(GPU_IDLE_W, GPU_BUSY_W, T0 + 2.5))])
    root = tmp_path / "powercap"
    pkg = plant_zone(root, "intel-rapl:0", "package-0", 0)
    dram = plant_zone(root, "intel-rapl:0:0", "dram", 0)
    mmio = plant_zone(root, "intel-rapl-mmio:0", "package-0", 0)  # the same package again
    counters = PoweredCounters([pkg, dram, mmio], clock.now)
    for f, w in ((pkg, PKG_IDLE_W), (dram, DRAM_IDLE_W), (mmio, PKG_IDLE_W)):
        counters.set_power_w(f, w)
    return root, counters, (pkg, dram, mmio)


def measure(make_session, clock, node, boundary: BoundaryKind, read_text=None):
    root, counters, (pkg, dram, mmio) = node
    rapl = RaplReader(root, read_text=read_text or counters, clock=clock.now)
    s = make_session(make_cfg(idle_baseline_s=2.0, boundary=boundary), rapl=rapl)
    s.start()  # the idle baseline: T0 to T0 + 2 s
    for f, w in ((pkg, PKG_BUSY_W), (dram, DRAM_BUSY_W), (mmio, PKG_BUSY_W)):
        counters.set_power_w(f, w)
    clock.sleep(1.0)
    with s.window():
        clock.sleep(WINDOW_S)
    return s.measurement(output_tokens=TOKENS, requests=4)


def test_node_boundary_gives_each_component_its_planted_energy(make_session, clock, node):
    m = measure(make_session, clock, node, BoundaryKind.node)
    b = m.boundary
    gpu_j, pkg_j, dram_j = GPU_BUSY_W * WINDOW_S, PKG_BUSY_W * WINDOW_S, DRAM_BUSY_W * WINDOW_S
    assert (b.boundary, b.gpus, b.cpu_packages, b.dram) == (
        "node",
        ["GPU-a"],
        ["package-0"],
        ["dram-0"],
    )
    assert b.gpu_j == pytest.approx(gpu_j, rel=1e-6)
    assert b.cpu_package_j == pytest.approx(pkg_j)  # the MMIO duplicate is not added
    assert b.dram_j == pytest.approx(dram_j)
    assert b.total_j == pytest.approx(gpu_j + pkg_j + dram_j, rel=1e-6)
    assert b.cpu_package_idle_adjusted_j == pytest.approx(pkg_j - PKG_IDLE_W * WINDOW_S)
    assert b.dram_idle_adjusted_j == pytest.approx(dram_j - DRAM_IDLE_W * WINDOW_S)
    assert b.gpu_idle_adjusted_j == pytest.approx(gpu_j - GPU_IDLE_W * WINDOW_S, rel=1e-4)
    idle_j = (GPU_IDLE_W + PKG_IDLE_W + DRAM_IDLE_W) * WINDOW_S
    assert b.idle_adjusted_j == pytest.approx(gpu_j + pkg_j + dram_j - idle_j, rel=1e-4)
    assert b.cpu_package_j_per_output_token == pytest.approx(pkg_j / TOKENS)
    assert b.j_per_output_token == pytest.approx((gpu_j + pkg_j + dram_j) / TOKENS, rel=1e-6)
    assert not any("CPU packages" in s for s in b.outside)
    assert any("power supply" in s for s in b.outside)
    assert sorted(k for k in m.null_reasons if k.startswith("boundary.")) == [
        "boundary.cpu_package_j_uncertainty",  # RAPL states no accuracy: the bounds alone
        "boundary.dram_j_uncertainty",
        "boundary.j_per_output_token_uncertainty",
        "boundary.total_j_uncertainty",
    ]


def test_the_node_total_has_no_bound_and_says_what_is_known(make_session, clock, node):
    """The GPU keeps its bound; RAPL states no accuracy, so the packages, DRAM and the node total
    have none, and the total's reason gives the GPU's bound and RAPL's reading limits: two
    counters read (package-0, dram-0; the MMIO copy is not), each off by two 61 uJ units and a
    microjoule of rounding and by a 1 ms update at 500 W at each edge, read at the window's edges
    on this clock: 2 x 2 x (2^-14 J + 1e-6 J) + 2 x 2 x 1 ms x 500 W = 2.000248 J."""
    m = measure(make_session, clock, node, BoundaryKind.node)
    b, why = m.boundary, m.null_reasons
    limits_j = 2 * 2 * (2.0**-14 + 1e-6) + 2 * 2 * 1e-3 * 500.0
    assert b.rapl_reading_limits_j == pytest.approx(limits_j, rel=1e-9)
    assert b.gpu_j_uncertainty is not None and b.gpu_j_uncertainty > 0
    assert b.gpu_j_uncertainty == m.energy.total_j_uncertainty
    assert b.cpu_package_j_uncertainty is None and b.dram_j_uncertainty is None
    assert why["boundary.cpu_package_j_uncertainty"].startswith("RAPL states no accuracy")
    assert b.total_j_uncertainty is None and b.j_per_output_token_uncertainty is None
    total_why = why["boundary.total_j_uncertainty"]
    assert total_why.startswith("cpu_package and dram hold RAPL energy: RAPL states no accuracy")
    assert f"gpu +/- {b.gpu_j_uncertainty:.3g} J" in total_why
    assert "RAPL's reading limits +/- 2 J" in total_why and "update 2 J" in total_why
    assert why["boundary.j_per_output_token_uncertainty"] == total_why


def test_a_gpu_boundary_total_carries_the_gpus_bound(make_session, clock, node):
    m = measure(make_session, clock, node, BoundaryKind.gpu)
    b = m.boundary
    assert m.energy.total_j_uncertainty is not None
    assert b.total_j_uncertainty == b.gpu_j_uncertainty == m.energy.total_j_uncertainty
    assert b.j_per_output_token_uncertainty == pytest.approx(b.total_j_uncertainty / TOKENS)
    assert b.rapl_reading_limits_j is None
    assert m.null_reasons["boundary.rapl_reading_limits_j"] == OUTSIDE_GPU


def test_gpu_boundary_changes_no_figure_and_lists_the_cpu_outside(make_session, clock, node):
    m = measure(make_session, clock, node, BoundaryKind.gpu)
    b = m.boundary
    assert b.boundary == "gpu" and b.gpus == ["GPU-a"] and b.cpu_packages == [] and b.dram == []
    assert b.total_j == m.energy.total_j and b.gpu_j == m.energy.total_j
    assert b.cpu_package_j is None and b.dram_j is None
    assert m.null_reasons["boundary.cpu_package_j"] == OUTSIDE_GPU
    assert m.null_reasons["boundary.dram_j"] == OUTSIDE_GPU
    assert any("CPU packages" in s for s in b.outside) and any("DRAM" in s for s in b.outside)
    assert m.energy.cpu_package_j == pytest.approx(PKG_BUSY_W * WINDOW_S)  # read as today
    assert_nulls_explained(m)


def test_root_only_dram_is_null_with_the_reason_and_so_is_the_total(make_session, clock, node):
    _, counters, (_, dram, _) = node
    denied = ScriptedCounters({dram: [PermissionError(13, "Permission denied")]})

    def read(path):
        return denied(path) if path == dram else counters(path)

    m = measure(make_session, clock, node, BoundaryKind.node, read_text=read)
    b = m.boundary
    assert b.cpu_package_j == pytest.approx(PKG_BUSY_W * WINDOW_S) and b.gpu_j is not None
    assert b.dram_j is None and b.total_j is None and b.j_per_output_token is None
    why = m.null_reasons["boundary.dram_j"]
    assert why.startswith("dram-0: permission denied reading ") and "root" in why
    assert why in m.null_reasons["boundary.total_j"]


def test_a_cpu_without_a_dram_domain_puts_dram_outside_and_totals_the_rest(
    tmp_path, install_nvml, make_session, clock
):
    """An AMD-like powercap tree (a package, no DRAM zone): nothing to read, so DRAM is listed
    outside and the node total is the GPU plus the package, not null."""
    install_nvml([FakeGpu("GPU-a", power=Step(GPU_IDLE_W, GPU_BUSY_W, T0 + 2.5))])
    root = tmp_path / "powercap"
    pkg = plant_zone(root, "intel-rapl:0", "package-0", 0)
    counters = PoweredCounters([pkg], clock.now)
    counters.set_power_w(pkg, PKG_IDLE_W)
    rapl = RaplReader(root, read_text=counters, clock=clock.now)
    s = make_session(make_cfg(idle_baseline_s=2.0, boundary=BoundaryKind.node), rapl=rapl)
    s.start()
    counters.set_power_w(pkg, PKG_BUSY_W)
    clock.sleep(1.0)
    with s.window():
        clock.sleep(WINDOW_S)
    m = s.measurement(output_tokens=TOKENS, requests=4)
    b = m.boundary
    gpu_j, pkg_j = GPU_BUSY_W * WINDOW_S, PKG_BUSY_W * WINDOW_S
    assert b.dram == [] and b.dram_j is None
    assert m.null_reasons["boundary.dram_j"] == NO_DRAM_DOMAIN
    assert b.total_j == pytest.approx(gpu_j + pkg_j, rel=1e-6)
    assert b.j_per_output_token == pytest.approx((gpu_j + pkg_j) / TOKENS, rel=1e-6)
    assert DRAM_OUTSIDE in b.outside
    assert_nulls_explained(m)
