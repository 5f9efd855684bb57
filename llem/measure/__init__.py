"""Energy, power, temperature and memory measurement of a generation window.

The public entry point is ``MeasurementSession`` (see ``llem.measure.session``). Modules, one
concept each: ``nvml`` (reading a GPU), ``devices`` (torch index -> NVML device by UUID, memory
bandwidth), ``sampler`` (the sampler thread and its clock), ``energy`` (the window's joules),
``replay`` (a recorded trace as a power source), ``throttle`` (clock
throttle reasons), ``energy_section`` and ``validity`` (the figures and the verdict on them),
``measurement`` (the frozen ``Measurement`` of a window, made of result sections), ``window`` (the
context manager), ``idle`` (the idle baseline and the ``IdleCache`` a caller holds). Nothing here
imports ``pynvml`` or ``torch`` at module level.
"""

from llem.measure.devices import DeviceInfo
from llem.measure.idle import IdleCache
from llem.measure.measurement import Measurement
from llem.measure.session import TIMESERIES_COLUMNS, MeasurementSession

__all__ = ["DeviceInfo", "IdleCache", "Measurement", "MeasurementSession", "TIMESERIES_COLUMNS"]
