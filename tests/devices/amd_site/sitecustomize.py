"""Puts the amdsmi test double in a llem subprocess, as on a ROCm machine (tests/devices only).

On ``PYTHONPATH`` with ``LLEM_TEST_FAKE_AMDSMI_STATE=<file>`` set: ``amdsmi`` is the double with one
GPU whose power cap starts at the file's ``power_cap_uw`` and is written back there (with every
cap set, in order, under ``changes``) on each change; NVML cannot start. The measurement session
is told its device is a GPU (``cuda``, as torch on ROCm calls it) although the model runs on this
machine's CPU, so that it measures through amdsmi.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any


class _Clock:
    def now(self) -> float:
        return time.monotonic()


def _install(state_file: Path) -> None:
    import pynvml

    from llem.testing.fake_amdsmi import FakeAmdGpu, FakeAmdSmi
    from llem.testing.fake_pynvml import FakeNvml

    class Recorded(FakeAmdSmi):
        def amdsmi_set_power_cap(self, handle: Any, sensor_ind: int, cap: int) -> None:
            super().amdsmi_set_power_cap(handle, sensor_ind, cap)
            state = json.loads(state_file.read_text())
            state["power_cap_uw"] = cap
            state["changes"].append(cap)
            state_file.write_text(json.dumps(state))

    state = json.loads(state_file.read_text())
    gpu = FakeAmdGpu("fake-amd-0000-0000", power_cap_uw=state["power_cap_uw"])
    sys.modules["amdsmi"] = Recorded([gpu], _Clock())
    no_driver = pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
    sys.modules["pynvml"] = FakeNvml([], _Clock(), init_error=no_driver)


def _measure_as_gpu() -> None:
    from llem.measure import session

    opened = session.MeasurementSession.__init__

    def init(self: Any, cfg: Any, *args: Any, **kw: Any) -> None:
        indices = kw.pop("torch_device_indices", args[0] if args else None)
        kw.pop("device_type", None)
        kw["cuda_sync"] = lambda: None
        opened(self, cfg, indices, "cuda", **kw)

    session.MeasurementSession.__init__ = init  # type: ignore[method-assign]


if os.environ.get("LLEM_TEST_FAKE_AMDSMI_STATE"):
    _install(Path(os.environ["LLEM_TEST_FAKE_AMDSMI_STATE"]))
    _measure_as_gpu()
