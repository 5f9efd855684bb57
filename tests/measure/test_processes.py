"""Other processes on a measured GPU are recorded (NVML's running compute processes, not ours)."""

from __future__ import annotations

import os

import pytest

from llem.testing.fake_pynvml import FakeGpu

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
        {"device": "GPU-a", "pid": 4242, "used_memory_mb": 2048.0},
        {"device": "GPU-a", "pid": 4343, "used_memory_mb": None},
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
