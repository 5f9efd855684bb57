"""result.json schema 7: each measured GPU names its torch index, its vendor and its index in the
vendor's own numbering; schema 6 files (which listed uuid, name, memory and limits, and called the
gpu section's index ``nvml_index``) migrate."""

from __future__ import annotations

from llem.result import GpuRecord, RunResult

GPU_6 = {"uuid": "GPU-a", "name": "NVIDIA H100", "memory_total_mb": 81559.0, "power_limit_w": 700.0}


def _schema_6(gpus: list[dict], reasons: dict[str, str]) -> dict:
    old = RunResult(status="ok").to_json()
    old["schema_version"] = 6
    old["hardware"]["gpus"] = gpus
    old["null_reasons"] = reasons
    old["gpu"] = {"devices": {"GPU-a": {"nvml_index": 2, "power_limit_w": 300.0}}}
    return old


def test_a_schema_6_gpu_becomes_an_nvidia_gpu_whose_indices_were_not_recorded() -> None:
    read = RunResult.from_json(_schema_6([dict(GPU_6)], {}))
    assert read.schema_version == 8
    assert read.hardware.gpus == [
        GpuRecord(torch_index=None, vendor="nvidia", vendor_index=None, **GPU_6)
    ]
    assert read.null_reasons["devices[0].vendor_index"] == "not recorded before result schema 7"
    assert read.null_reasons["devices[0].torch_index"] == "not recorded before result schema 7"
    assert read.gpu is not None and read.gpu.devices["GPU-a"] == {
        "vendor_index": 2,
        "power_limit_w": 300.0,
    }


def test_a_replayed_device_gets_a_null_vendor_with_its_reason() -> None:
    why = "replayed device (no hardware behind it)"
    gpu = {"uuid": "dev0", "name": "replay:t.csv", "memory_total_mb": None}
    old = _schema_6([gpu], {"devices[0].nvml_index": why, "devices[0].torch_index": why})
    old["gpu"] = None
    read = RunResult.from_json(old)
    assert read.hardware.gpus[0].vendor is None and read.hardware.gpus[0].vendor_index is None
    assert read.null_reasons["devices[0].vendor_index"] == why
    assert read.null_reasons["devices[0].vendor"] == why
    assert "devices[0].nvml_index" not in read.null_reasons
