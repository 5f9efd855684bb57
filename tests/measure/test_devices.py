"""torch device index -> NVML device, by UUID, under several CUDA_VISIBLE_DEVICES settings."""

from __future__ import annotations

import pytest

from llem.config.measurement import EnergySource
from llem.devices.nvidia import init_nvml
from llem.errors import PreflightError
from llem.measure import devices as measure_devices
from llem.measure.devices import DeviceMappingError, resolve_devices
from llem.plain import json_ready
from llem.testing.fake_pynvml import FakeGpu

from .conftest import make_cfg

UUIDS = [f"GPU-{c * 8}-1111-2222-3333-44445555666{i}" for i, c in enumerate("abcd")]
MIGS = ["MIG-0e1e2e3e-aaaa-bbbb-cccc-000000000001", "MIG-0e1e2e3e-aaaa-bbbb-cccc-000000000002"]


@pytest.fixture
def nvml(install_nvml):
    gpus = [FakeGpu(u) for u in UUIDS]
    gpus[1].migs = list(MIGS)
    return install_nvml(gpus)


def mapped(nvml, indices, cvd=None, torch_uuids=None, **env):
    if cvd is not None:
        env["CUDA_VISIBLE_DEVICES"] = cvd
    out, warnings = resolve_devices(init_nvml(nvml), indices, env, torch_uuids)
    return [(d.torch_index, d.vendor_index, d.uuid) for d, _ in out], warnings


def test_unset_maps_index_to_index(nvml):
    devs, warnings = mapped(nvml, [0, 1])
    assert devs == [(0, 0, UUIDS[0]), (1, 1, UUIDS[1])]
    assert warnings == []


def test_none_means_every_visible_device(nvml):
    devs, _ = mapped(nvml, None, cvd="3,1")
    assert devs == [(0, 3, UUIDS[3]), (1, 1, UUIDS[1])]


def test_reordered_integer_list(nvml):
    devs, _ = mapped(nvml, [0, 1], cvd="2,0")
    assert devs == [(0, 2, UUIDS[2]), (1, 0, UUIDS[0])]


def test_uuid_prefixes_and_spaces(nvml):
    devs, _ = mapped(nvml, [0, 1], cvd=" GPU-cccc, gpu-aaaaaaaa-1111")
    assert devs == [(0, 2, UUIDS[2]), (1, 0, UUIDS[0])]


def test_parsing_stops_at_first_invalid_entry(nvml):
    devs, _ = mapped(nvml, [0], cvd="3,nonsense,1")
    assert devs == [(0, 3, UUIDS[3])]
    with pytest.raises(DeviceMappingError, match=r"cuda:1 is not visible.*'3,nonsense,1'.*1 of"):
        mapped(nvml, [1], cvd="3,nonsense,1")
    with pytest.raises(DeviceMappingError):  # out of range index is invalid too
        mapped(nvml, [0], cvd="7,0")


def test_repeated_entry_or_empty_string_hides_everything(nvml):
    for cvd in ("1,1", "", "-1"):
        with pytest.raises(DeviceMappingError, match="0 of NVML's 4 GPUs"):
            mapped(nvml, [0], cvd=cvd)


def test_mig_instance_is_measured_through_its_parent(nvml):
    devs, warnings = mapped(nvml, [0], cvd=MIGS[1])
    assert devs == [(0, 1, UUIDS[1])]
    assert "MIG instance" in warnings[0] and UUIDS[1] in warnings[0]
    legacy = f"MIG-{UUIDS[1]}/1/0"
    devs, _ = mapped(nvml, [0], cvd=legacy)
    assert devs == [(0, 1, UUIDS[1])]


def test_two_torch_devices_on_one_gpu_are_measured_once(nvml):
    devs, warnings = mapped(nvml, [0, 1], cvd=",".join(MIGS))
    assert devs == [(0, 1, UUIDS[1])]
    assert any("measured once" in w for w in warnings)


def test_torch_uuids_win_over_the_environment(nvml):
    # torch reports UUIDs without the GPU- prefix; CUDA_VISIBLE_DEVICES is not consulted.
    bare = {0: UUIDS[3][4:].upper(), 1: UUIDS[0][4:]}
    devs, warnings = mapped(nvml, [0, 1], cvd="0,1", torch_uuids=bare)
    assert devs == [(0, 3, UUIDS[3]), (1, 0, UUIDS[0])]
    assert warnings == []


def test_unknown_torch_uuid_falls_back_to_environment(nvml):
    devs, warnings = mapped(nvml, [0], cvd="2", torch_uuids={0: "ffffffff-0000"})
    assert devs == [(0, 2, UUIDS[2])]
    assert "falling back to CUDA_VISIBLE_DEVICES" in warnings[0]


def test_mixed_models_warn_about_cuda_device_order(install_nvml):
    nvml = install_nvml([FakeGpu(UUIDS[0], name="NVIDIA A100"), FakeGpu(UUIDS[1], name="T4")])
    _, warnings = mapped(nvml, [0], cvd="1")
    assert any("CUDA_DEVICE_ORDER" in w for w in warnings)
    _, warnings = mapped(nvml, [0], cvd="1", CUDA_DEVICE_ORDER="PCI_BUS_ID")
    assert warnings == []


def test_session_devices_and_bandwidth(nvml, make_session, monkeypatch):
    nvml.gpus[2].bus_width_bits = None  # bus width not reported
    monkeypatch.setattr(measure_devices, "torch_device_uuids", lambda idx: None)
    s = make_session(make_cfg(), indices=[0, 1], env={"CUDA_VISIBLE_DEVICES": "3,2"})
    s.start()
    with s.window():
        s.clock.sleep(0.2)
    rep = s.measurement(output_tokens=10, requests=1)
    assert rep.devices[0].to_dict() == {
        "torch_index": 0,
        "vendor": "nvidia",
        "vendor_index": 3,
        "uuid": UUIDS[3],
        "name": "NVIDIA H100 80GB HBM3",
        "memory_total_mb": 80e9 / 2**20,  # MB = 2**20 bytes, like torch's figures
        "memory_bandwidth_bytes_per_s": 5120 / 8 * 2619e6 * 2,  # 3.35 TB/s, the H100 SXM figure
        "power_limit_w": 700.0,
        "default_power_limit_w": 700.0,
    }
    assert rep.devices[1].vendor_index == 2
    assert rep.devices[1].memory_bandwidth_bytes_per_s is None
    assert "bus width" in rep.null_reasons["devices[1].memory_bandwidth_bytes_per_s"]
    assert rep.memory_bandwidth_bytes_per_s is None  # not all devices known
    assert set(rep.energy.per_device_j) == {UUIDS[3], UUIDS[2]}
    assert rep.memory_bandwidth_by_torch_index() == {0: 5120 / 8 * 2619e6 * 2, 1: None}
    hw = rep.hardware  # the result's hardware section, as lifecycle writes it
    assert (hw.gpu_model, hw.gpu_count) == ("NVIDIA H100 80GB HBM3", 2) and hw.hostname
    assert [g.uuid for g in hw.gpus] == [UUIDS[3], UUIDS[2]]
    assert json_ready(hw.gpus[0]) == {  # as result.json holds it
        "torch_index": 0,
        "vendor": "nvidia",
        "vendor_index": 3,
        "uuid": UUIDS[3],
        "name": "NVIDIA H100 80GB HBM3",
        "memory_total_mb": 80e9 / 2**20,
        "power_limit_w": 700.0,
        "default_power_limit_w": 700.0,
    }


def test_gpu_indices_on_a_run_that_measures_no_gpu_is_one_line(nvml, make_session):
    s = make_session(make_cfg(energy=EnergySource.auto, gpu_indices=[5]), device_type="cpu")
    assert s.preflight() == [
        "measurement.gpu_indices=[5] names GPUs to measure, but this run is on device=cpu, "
        "where no GPU is measured; leave it unset"
    ]
    assert make_session(make_cfg(energy=EnergySource.auto), device_type="cpu").preflight() == []


def test_preflight_names_invisible_gpu_index(nvml, make_session):
    s = make_session(make_cfg(gpu_indices=[0, 2]), env={"CUDA_VISIBLE_DEVICES": "1,3"})
    problems = s.preflight()
    assert problems == [
        "measurement.gpu_indices=[0, 2]: only 2 GPU(s) are visible (CUDA_VISIBLE_DEVICES is '1,3')"
    ]
    with pytest.raises(PreflightError, match="cuda:2 is not visible"):
        s.start()
