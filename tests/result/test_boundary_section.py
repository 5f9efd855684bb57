"""result.json's boundary section (schema 6): older files read with it null and the reason; the
section round-trips."""

from __future__ import annotations

from llem.result import Boundary, RunResult


def test_a_schema_5_file_reads_with_boundary_null_and_why() -> None:
    old = RunResult(status="ok").to_json()
    old["schema_version"] = 5
    del old["quality"], old["boundary"]
    read = RunResult.from_json(old)
    assert read.schema_version == 8 and read.boundary is None
    assert read.null_reasons["boundary"] == "not recorded before result schema 6"


def test_the_section_round_trips() -> None:
    result = RunResult(status="ok")
    result.boundary = Boundary(
        boundary="node",
        gpus=["GPU-a"],
        cpu_packages=["package-0"],
        cpu_packages_note="packages read: 0; the process may run on package(s) 0",
        dram=["dram-0"],
        outside=["fans"],
        gpu_j=500.0,
        cpu_package_j=160.0,
        dram_j=None,
    )
    result.null_reasons["boundary.dram_j"] = "dram-0: permission denied"
    read = RunResult.from_json(result.to_json())
    assert read.boundary == result.boundary
    assert read.to_json()["boundary"]["dram_j"] is None
