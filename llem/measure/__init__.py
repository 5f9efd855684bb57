"""Energy, power, temperature and memory measurement of a generation window.

The public entry point is ``MeasurementSession`` (see ``llem.measure.session``). Modules, one
concept each: ``nvml`` (reading a GPU), ``devices`` (torch index -> NVML device by UUID, memory
bandwidth), ``sampler`` (the sampler thread and its clock), ``energy`` (the window's joules),
``replay`` (a recorded trace as a power source), ``rapl`` (CPU package energy), ``throttle`` (clock
throttle reasons), ``report`` (the frozen result), ``window`` (the context manager). Nothing here
imports ``pynvml`` or ``torch`` at module level.
"""

from llem.measure.devices import DeviceInfo
from llem.measure.report import MeasurementReport
from llem.measure.session import TIMESERIES_COLUMNS, MeasurementSession

__all__ = ["DeviceInfo", "MeasurementReport", "MeasurementSession", "TIMESERIES_COLUMNS"]
