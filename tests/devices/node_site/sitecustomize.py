"""Puts a two-GPU NVIDIA machine with RAPL in a llem subprocess (tests/devices only).

On ``PYTHONPATH`` with ``LLEM_TEST_NODE_SITE=<json file>`` set: ``pynvml`` is the NVML double with
two GPUs drawing the file's ``gpu_w`` (W each, constant), and the measurement session reads RAPL
from a powercap tree planted under the file's ``powercap`` directory whose package and DRAM
counters advance at ``package_w`` and ``dram_w`` on the wall clock. The session is told its device
is a GPU (``cuda``) although the model runs on this machine's CPU. With ``"cpu_only": true`` the
machine has no GPU at all (NVML's ``nvmlInit`` fails with ``NVMLError_LibraryNotFound``, as where
no NVIDIA driver is installed) and the session keeps the run's own device.
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


def _install(spec: dict[str, Any]) -> None:
    from llem.devices.cpu_energy import RaplReader
    from llem.measure import session
    from llem.testing.fake_pynvml import Constant, FakeGpu, FakeNvml
    from llem.testing.planted_rapl import PoweredCounters, plant_zone

    gpus = [FakeGpu(uuid, power=Constant(w)) for uuid, w in spec["gpu_w"].items()]
    cpu_only = bool(spec.get("cpu_only"))
    not_found = 12  # NVML_ERROR_LIBRARY_NOT_FOUND
    sys.modules["pynvml"] = FakeNvml(gpus, _Clock(), init_error=not_found if cpu_only else None)
    root = Path(spec["powercap"])
    pkg = plant_zone(root, "intel-rapl:0", "package-0", 0)
    dram = plant_zone(root, "intel-rapl:0:0", "dram", 0)
    counters = PoweredCounters([pkg, dram], time.monotonic)
    counters.set_power_w(pkg, spec["package_w"])
    counters.set_power_w(dram, spec["dram_w"])
    opened = session.MeasurementSession.__init__

    def init(self: Any, cfg: Any, *args: Any, **kw: Any) -> None:
        indices = kw.pop("torch_device_indices", args[0] if args else None)
        device = kw.pop("device_type", args[1] if len(args) > 1 else "cuda")
        kw["cuda_sync"] = lambda: None
        kw["rapl"] = RaplReader(root, read_text=counters, clock=time.perf_counter)
        opened(self, cfg, indices, device if cpu_only else "cuda", **kw)

    session.MeasurementSession.__init__ = init  # type: ignore[method-assign]


if os.environ.get("LLEM_TEST_NODE_SITE"):
    _install(json.loads(Path(os.environ["LLEM_TEST_NODE_SITE"]).read_text()))
