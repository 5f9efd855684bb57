"""result.json schema 7: each measured GPU names its vendor and its index in the vendor's own
numbering; schema 6 files (NVML's ``nvml_index``) migrate."""

from __future__ import annotations

from llem.result import RunResult


def _schema_6(gpus: list[dict], reasons: dict[str, str]) -> dict:
    old = RunResult(status="ok").to_json()
    old["schema_version"] = 6
    old["hardware"]["gpus"] = gpus
    old["null_reasons"] = reasons
    old["gpu"] = {"devices": {"GPU-a": {"nvml_index": 2, "power_limit_w": 300.0}}}
    return old


def test_a_schema_6_gpu_becomes_an_nvidia_gpu_with_its_vendor_index() -> None:
    gpu = {"torch_index": 0, "nvml_index": 2, "uuid": "GPU-a", "name": "NVIDIA H100"}
    read = RunResult.from_json(_schema_6([gpu], {}))
    assert read.schema_version == 7
    assert read.hardware.gpus == [
        {
            "torch_index": 0,
            "vendor": "nvidia",
            "vendor_index": 2,
            "uuid": "GPU-a",
            "name": "NVIDIA H100",
        }
    ]
    assert read.gpu is not None and read.gpu.devices["GPU-a"] == {
        "vendor_index": 2,
        "power_limit_w": 300.0,
    }


def test_a_replayed_device_keeps_its_null_index_and_gets_a_null_vendor_with_the_reason() -> None:
    why = "replayed device (no hardware behind it)"
    gpu = {"torch_index": None, "nvml_index": None, "uuid": "dev0", "name": "replay:t.csv"}
    old = _schema_6([gpu], {"devices[0].nvml_index": why, "devices[0].torch_index": why})
    old["gpu"] = None
    read = RunResult.from_json(old)
    assert read.hardware.gpus[0]["vendor"] is None and read.hardware.gpus[0]["vendor_index"] is None
    assert read.null_reasons["devices[0].vendor_index"] == why
    assert read.null_reasons["devices[0].vendor"] == why
    assert "devices[0].nvml_index" not in read.null_reasons
