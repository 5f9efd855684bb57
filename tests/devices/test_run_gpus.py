"""One run's GPU library (llem.devices.gpus.RunGpus): opened at the first ask, lent to every
later one, shut down once by the run; a library that cannot start is tried once."""

from __future__ import annotations

import pynvml
import pytest

from llem.devices.gpu import GpuUnavailable
from llem.devices.gpus import RunGpus
from llem.devices.nvidia import init_nvml
from llem.testing.fake_pynvml import FakeGpu, FakeNvml


def test_every_ask_gets_the_library_opened_at_the_first(clock) -> None:
    fake = FakeNvml([FakeGpu("GPU-a"), FakeGpu("GPU-b")], clock)
    gpus = RunGpus(lambda: init_nvml(fake))
    first, second = gpus(), gpus()
    first.shutdown()  # a borrower's shutdown leaves it open for the others
    assert [g.uuid for g in second.gpus()] == ["GPU-a", "GPU-b"]
    assert (fake.init_calls, fake.shutdown_calls) == (1, 0)
    gpus.close()
    gpus.close()
    assert (fake.init_calls, fake.shutdown_calls) == (1, 1)
    with gpus:  # the next run's: opened afresh, closed on the way out
        gpus()
    assert (fake.init_calls, fake.shutdown_calls) == (2, 2)


def test_a_library_that_cannot_start_is_tried_once(clock) -> None:
    fake = FakeNvml([], clock, init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    gpus = RunGpus(lambda: init_nvml(fake))
    for _ in range(3):
        with pytest.raises(GpuUnavailable, match="DriverNotLoaded"):
            gpus()
    gpus.close()
    assert (fake.init_calls, fake.shutdown_calls) == (1, 0)
