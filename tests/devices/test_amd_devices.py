"""Which amdsmi GPU a ROCm torch device is: ROCR_VISIBLE_DEVICES, then HIP_VISIBLE_DEVICES (or
CUDA_VISIBLE_DEVICES) index into what is left; an index no GPU has is one pre-flight line naming
the variable and its value (exit 3, as for CUDA_VISIBLE_DEVICES)."""

from __future__ import annotations

import pytest

from llem.devices.amd import init_amdsmi
from llem.errors import EXIT_PREFLIGHT, PreflightError
from llem.measure.devices import resolve_devices
from llem.testing.fake_amdsmi import FakeAmdGpu, FakeAmdSmi

from .conftest import make_cfg

UUIDS = [f"{i}{i}{i}{i}aaaa-0000-1111-2222-33334444555{i}" for i in range(4)]


@pytest.fixture
def fake(clock) -> FakeAmdSmi:
    return FakeAmdSmi([FakeAmdGpu(u) for u in UUIDS], clock)


def mapped(fake: FakeAmdSmi, indices, **env: str) -> list[str]:
    found, _ = resolve_devices(init_amdsmi(fake), indices, env)
    return [gpu.uuid for _, gpu in found]


def test_hip_visible_devices_numbers_the_devices_torch_sees(fake) -> None:
    assert mapped(fake, [0, 1], HIP_VISIBLE_DEVICES="2,0") == [UUIDS[2], UUIDS[0]]
    assert mapped(fake, None) == UUIDS  # unset: every GPU, in amdsmi's order


def test_rocr_applies_first_and_hip_indexes_what_it_left(fake) -> None:
    env = dict(ROCR_VISIBLE_DEVICES="1,2,3", HIP_VISIBLE_DEVICES="2")
    assert mapped(fake, [0], **env) == [UUIDS[3]]
    assert mapped(fake, [0], ROCR_VISIBLE_DEVICES=f"GPU-{UUIDS[3][:8]}") == [UUIDS[3]]


def test_hip_reads_cuda_visible_devices_when_its_own_is_unset(fake) -> None:
    assert mapped(fake, [0], CUDA_VISIBLE_DEVICES="1") == [UUIDS[1]]


def test_an_index_no_gpu_has_is_one_preflight_line(make_session, clock) -> None:
    two = FakeAmdSmi([FakeAmdGpu(UUIDS[0]), FakeAmdGpu(UUIDS[1])], clock)
    s = make_session(two, make_cfg(), indices=[0], env={"HIP_VISIBLE_DEVICES": "5"})
    assert s.preflight() == [
        "torch devices=[0]: only 0 GPU(s) are visible (HIP_VISIBLE_DEVICES is '5')"
    ]
    with pytest.raises(PreflightError, match="HIP_VISIBLE_DEVICES is '5'") as err:
        s.start()
    assert err.value.exit_code == EXIT_PREFLIGHT


def test_measurement_energy_amdsmi_on_an_nvidia_machine_is_one_line(clock, tmp_path) -> None:
    from llem.devices.nvidia import init_nvml
    from llem.measure.sources import source_problems
    from llem.testing.fake_pynvml import FakeGpu, FakeNvml

    nvml = FakeNvml([FakeGpu("GPU-n")], clock)
    problems = source_problems(make_cfg(), "cuda", [0], {}, lambda: init_nvml(nvml))
    assert problems == [
        "measurement.energy=amdsmi asks for amdsmi, but this machine's GPUs are read through "
        "NVML (nvidia)"
    ]


def test_facts_and_snapshot_in_llems_units_with_reasons_for_na(clock) -> None:
    gpu = FakeAmdGpu(UUIDS[0], vram_max_bandwidth_gbps="N/A", power_cap_uw=650_000_000)
    lib = init_amdsmi(FakeAmdSmi([gpu], clock))
    facts = lib.facts(lib.gpus()[0])
    assert (facts.name, facts.memory_total_mb) == ("AMD Instinct MI300X", 196_592.0)
    assert (facts.power_limit_w, facts.default_power_limit_w) == (650.0, 750.0)
    assert facts.memory_bandwidth_bytes_per_s is None
    assert facts.null_reasons["memory_bandwidth_bytes_per_s"] == (
        "amdsmi reports no vram_max_bandwidth"
    )
    snap = lib.snapshot()
    assert snap["driver_version"] == "6.10.5"
    assert snap["gpus"] == [
        {"index": 0, "name": "AMD Instinct MI300X", "uuid": UUIDS[0], "memory_total_mb": 196_592}
    ]


def test_every_amdsmi_call_holds_the_librarys_lock(clock) -> None:
    """amdsmi is not thread-safe before ROCm 7.2: another thread cannot take the lock while a
    call is inside amdsmi."""
    import threading

    from llem.devices.gpu_control import GpuControl

    held: list[bool] = []

    class Watched(FakeAmdSmi):
        def _gpu(self, handle, function):
            free = []
            probe = threading.Thread(target=lambda: free.append(lib.lock.acquire(blocking=False)))
            probe.start()
            probe.join()
            if free[0]:
                lib.lock.release()
            held.append(not free[0])
            return super()._gpu(handle, function)

    lib = init_amdsmi(Watched([FakeAmdGpu(UUIDS[0])], clock))
    (g,) = lib.gpus()
    reader = lib.reader(g)
    reader.read_sample(clock.now())
    reader.read_counter_j()
    GpuControl(lib).state(g)
    lib.set_power_limit_w(g, 500)
    lib.facts(g)
    assert len(held) > 15 and all(held)
