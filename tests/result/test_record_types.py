"""result.json's sub-records are typed (``hardware.gpus``, ``energy.other_processes``,
``server.processes``, ``gpu.devices``, ``energy.fit`` and ``steady_state.fit``) and written
exactly as the plain dicts they replaced: the pinned file ``tests/data/result_v8_records.json``
was written by the code that still held dicts, so a record whose key is renamed or reordered, or
whose value changes, fails here."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from llem.result import (
    FitRecord,
    GpuRecord,
    ResultFormatError,
    RunResult,
    ServerSection,
    SteadyState,
)
from llem.result.figure import Figure
from llem.result.gpu import GpuSection
from llem.vocabulary.processes import EngineProcess, OtherProcess

PINNED = Path(__file__).parent.parent / "data" / "result_v8_records.json"
FIT = FitRecord(
    a=0.00012,
    a_se=1.5e-06,
    b=0.0421,
    b_se=0.0003,
    p_static_w=95.25,
    p_static_se=0.8,
    p_between_w=None,
    k=2.5e-09,
    k_se=None,
    lag_s=0.05,
    r2=0.9987,
    n_steps=812,
    n_intervals=64,
    interval_min_s=0.4,
    split="linear_fit",
)


def _records() -> RunResult:
    """The pinned file's result, built with the typed records."""
    r = RunResult(
        status="ok",
        started_at="2026-11-29T14:00:00+00:00",
        llem_version="0.0.0-fixture",
        config_hash="abc123",
        model="tiny",
        backend="server",
        device="cuda",
    )
    r.hardware.hostname = "node-1"
    r.hardware.gpu_model = "NVIDIA H100 80GB HBM3"
    r.hardware.gpu_count = 2
    r.hardware.gpus = [
        GpuRecord(
            torch_index=0,
            vendor="nvidia",
            vendor_index=2,
            uuid="GPU-a",
            name="NVIDIA H100 80GB HBM3",
            memory_total_mb=81559.0,
            power_limit_w=700.0,
            default_power_limit_w=700.0,
        ),
        GpuRecord(
            torch_index=1,
            vendor="amd",
            vendor_index=0,
            uuid="GPU-b",
            name="AMD MI300X",
            memory_total_mb=None,
            power_limit_w=450.5,
            default_power_limit_w=None,
        ),
    ]
    others = [OtherProcess("GPU-a", 4242, 2048.0), OtherProcess("GPU-b", 4343, None)]
    r.set_figure("energy.other_processes", Figure(others))
    r.server = ServerSection(
        url="http://127.0.0.1:8000",
        launched=False,
        endpoint="completions",
        model="m",
        gpus_used=["GPU-a"],
        processes=[
            EngineProcess("GPU-a", 99, 3072.0, "python3"),
            EngineProcess("GPU-a", 100, None, None),
        ],
        processes_found_by="pid 99 (python3) listening on port 8000",
        on_this_host=True,
    )
    r.gpu = GpuSection(
        requested_power_limit_w=450.0,
        devices={
            "GPU-a": {
                "vendor_index": 2,
                "power_limit_w_before": 700.0,
                "power_limit_w": 450.0,
                "enforced_power_limit_w": 450.0,
                "sm_clock_mhz": 1980,
                "memory_clock_mhz": 2619,
                "enforced_power_limit_w_window_end": 450.0,
                "sm_clock_mhz_window_end": 1755,
                "memory_clock_mhz_window_end": 2619,
                "restored": "power limit 700 W",
            }
        },
        restored=True,
    )
    r.set_figure("energy.fit", Figure(FIT))
    r.null_reasons["energy.fit.p_between_w"] = "not identified: no time between steps"
    r.null_reasons["energy.fit.k_se"] = "unknown"
    r.steady_state = SteadyState(
        rule="open_loop",
        start_s=1.0,
        end_s=21.5,
        window_s=20.5,
        requests=40,
        output_tokens=5120,
        output_tokens_per_s=249.756,
        mean_concurrency=7.9,
    )
    r.set_figure("steady_state.fit", Figure(replace(FIT, lag_s=None, n_steps=700)))
    r.null_reasons["steady_state.fit.lag_s"] = "no lag was estimated"
    return r


def test_typed_records_write_the_pinned_bytes(tmp_path: Path) -> None:
    written = _records().write(tmp_path)
    assert written.read_text(encoding="utf-8") == PINNED.read_text(encoding="utf-8")


def test_the_pinned_file_reads_back_typed_and_writes_the_same_bytes(tmp_path: Path) -> None:
    read = RunResult.from_json(PINNED)
    assert read == _records()
    assert all(isinstance(g, GpuRecord) for g in read.hardware.gpus)
    assert read.energy.other_processes == [
        OtherProcess("GPU-a", 4242, 2048.0),
        OtherProcess("GPU-b", 4343, None),
    ]
    assert read.server is not None and read.server.processes is not None
    assert all(isinstance(p, EngineProcess) for p in read.server.processes)
    text = read.write(tmp_path).read_text(encoding="utf-8")
    assert text == PINNED.read_text(encoding="utf-8")


def test_key_order_of_each_record() -> None:
    data = json.loads(PINNED.read_text(encoding="utf-8"))
    assert list(data["hardware"]["gpus"][0]) == [
        "torch_index",
        "vendor",
        "vendor_index",
        "uuid",
        "name",
        "memory_total_mb",
        "power_limit_w",
        "default_power_limit_w",
    ]
    assert list(data["energy"]["other_processes"][0]) == ["device", "pid", "used_memory_mb"]
    assert list(data["server"]["processes"][0]) == ["device", "pid", "used_memory_mb", "name"]
    fit_keys = ["a", "a_se", "b", "b_se", "p_static_w", "p_static_se", "p_between_w", "k", "k_se"]
    fit_keys += ["lag_s", "r2", "n_steps", "n_intervals", "interval_min_s", "split"]
    assert list(data["energy"]["fit"]) == list(data["steady_state"]["fit"]) == fit_keys


def test_a_fit_from_before_schema_8_reads_its_context_cost_and_lag_null() -> None:
    data = json.loads(PINNED.read_text(encoding="utf-8"))
    for key in ("k", "k_se", "lag_s"):
        del data["energy"]["fit"][key]
    fit = RunResult.from_json(data).energy.fit
    assert fit == replace(FIT, k=None, k_se=None, lag_s=None)


def test_a_gpu_recorded_before_its_indices_and_default_limit_reads_them_null() -> None:
    """Schema 7 files written before hardware.gpus named the indices and vendor, and files
    written before the default limit was read, lack those keys."""
    data = json.loads(PINNED.read_text(encoding="utf-8"))
    data["hardware"]["gpus"] = [
        {"uuid": "GPU-a", "name": "NVIDIA H100", "memory_total_mb": 81559.0, "power_limit_w": 700}
    ]
    (gpu,) = RunResult.from_json(data).hardware.gpus
    assert gpu == GpuRecord(
        uuid="GPU-a", name="NVIDIA H100", memory_total_mb=81559.0, power_limit_w=700.0
    )
    assert gpu.torch_index is None and gpu.vendor is None and gpu.default_power_limit_w is None


@pytest.mark.parametrize(
    "where, entry",
    [
        (("hardware", "gpus"), {"uuid": "GPU-a", "name": "x", "serial": "1"}),
        (("energy", "other_processes"), {"device": "GPU-a", "pid": 1, "used": 2.0}),
        (("server", "processes"), {"device": "GPU-a", "pid": 1, "used_memory_mb": None}),
        (("energy", "fit"), {"a": 1.0, "c": 2.0}),
    ],
)
def test_a_record_with_a_key_the_schema_does_not_know_or_lacks_one_is_rejected(
    where: tuple[str, str], entry: dict[str, object]
) -> None:
    data = json.loads(PINNED.read_text(encoding="utf-8"))
    data[where[0]][where[1]] = entry if where[1] == "fit" else [entry]
    with pytest.raises(ResultFormatError, match=where[1]):
        RunResult.from_json(data)


def test_a_gpu_device_entry_keeps_only_the_keys_its_run_set(tmp_path: Path) -> None:
    """A run that ended before its window's end has no ``*_window_end`` keys, and one that ended
    before the restore no ``restored``: reading and writing adds none of them."""
    data = json.loads(PINNED.read_text(encoding="utf-8"))
    data["gpu"]["devices"] = {
        "GPU-a": {"vendor_index": 2, "power_limit_w": 450.0, "restored": None},
        "GPU-b": {"restored": "power limit 300 W"},
    }
    read = RunResult.from_json(data)
    assert read.gpu is not None and read.gpu.devices["GPU-b"] == {"restored": "power limit 300 W"}
    written = json.loads(read.write(tmp_path).read_text(encoding="utf-8"))
    assert written["gpu"]["devices"] == data["gpu"]["devices"]
    assert list(written["gpu"]["devices"]["GPU-a"]) == ["vendor_index", "power_limit_w", "restored"]
