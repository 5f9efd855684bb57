"""Other processes on a measured GPU are recorded (NVML's running compute processes, not ours)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from llem.measure.family import is_own, parent_pid
from llem.testing.fake_pynvml import FakeGpu
from llem.vocabulary.processes import OtherProcess

from .conftest import assert_nulls_explained, make_cfg


def report_with(install_nvml, make_session, clock, processes):
    install_nvml([FakeGpu("GPU-a", processes=processes)])
    s = make_session(make_cfg())
    s.start()
    with s.window():
        clock.sleep(1.0)
    return s.measurement(output_tokens=1, requests=1)


def test_other_processes_are_recorded_and_fail_the_check(install_nvml, make_session, clock):
    procs = [(os.getpid(), 3 * 2**30), (4242, 2 * 2**30), (4343, None)]
    rep = report_with(install_nvml, make_session, clock, procs)
    assert rep.energy.other_processes == [
        OtherProcess(device="GPU-a", pid=4242, used_memory_mb=2048.0),
        OtherProcess(device="GPU-a", pid=4343, used_memory_mb=None),
    ]
    assert rep.validity.checks["other_processes"] == "failed"
    assert rep.validity.energy_valid is False
    [problem] = rep.validity.problems
    assert "pid 4242 on GPU-a (2048 MB), pid 4343 on GPU-a" in problem


@pytest.mark.parametrize("procs, status", [([], "passed"), (None, "not checked")])
def test_alone_or_cannot_tell(install_nvml, make_session, clock, procs, status):
    mine = None if procs is None else [(os.getpid(), 2**30)]
    rep = report_with(install_nvml, make_session, clock, mine)
    assert rep.validity.checks["other_processes"] == status
    assert rep.validity.energy_valid is True
    assert rep.energy.other_processes == ([] if procs is not None else None)
    assert_nulls_explained(rep)


def test_own_descendants_are_not_other_processes(install_nvml, make_session, clock):
    """vLLM's engine core and workers are llem's children on the GPU: only the unrelated pid
    (this process's parent, which is not llem's descendant) counts against the run."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        procs = [(os.getpid(), 2**30), (child.pid, 3 * 2**30), (os.getppid(), 2**30)]
        rep = report_with(install_nvml, make_session, clock, procs)
    finally:
        child.kill()
        child.wait()
    assert rep.energy.other_processes == [
        OtherProcess(device="GPU-a", pid=os.getppid(), used_memory_mb=1024.0)
    ]
    assert rep.validity.checks["other_processes"] == "failed"
    [problem] = rep.validity.problems
    assert f"pid {os.getppid()} on GPU-a" in problem and str(child.pid) not in problem


def _proc(root: Path, pid: int, comm: str, ppid: int) -> None:
    (root / str(pid)).mkdir()
    (root / str(pid) / "stat").write_text(f"{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 4194560\n")


def test_is_own_follows_the_parent_chain(tmp_path):
    _proc(tmp_path, 100, "python", 1)  # llem
    _proc(tmp_path, 200, "VLLM::EngineCore", 100)  # its child
    _proc(tmp_path, 300, "a (weird) name", 200)  # a grandchild, with ')' in its name
    _proc(tmp_path, 400, "python", 1)  # unrelated
    _proc(tmp_path, 500, "bash", 400)  # a child of the unrelated one
    own = {pid: is_own(pid, root=100, proc_root=tmp_path) for pid in (100, 200, 300, 400, 500)}
    assert own == {100: True, 200: True, 300: True, 400: False, 500: False}
    assert not is_own(999, root=100, proc_root=tmp_path)  # gone, or not in this namespace
    assert parent_pid(300, tmp_path) == 200
