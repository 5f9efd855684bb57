"""Energy, power, temperature and memory measurement of a generation window.

The public entry point is ``MeasurementSession`` (see ``llem.measure.session``); it receives the
GPUs' vendor library from the device layer (``llem.devices``) and never reads a vendor's API
itself. Modules, one concept each: ``devices`` (torch index -> the vendor's GPU by UUID),
``gpu_source`` (the GPUs as a power source), ``sampler`` (the sampler thread and its clock),
``energy`` (the window's joules), ``replay`` (a recorded trace as a power source), ``throttle``
(clock throttle reasons), ``energy_section`` and ``validity`` (the figures and the verdict on
them), ``measurement`` (the frozen ``Measurement`` of a window, made of result sections),
``window`` (the context manager), ``timeseries`` (the samples' CSV), ``idle`` (the idle baseline
and the ``IdleCache`` a caller holds). Nothing here imports a vendor library or ``torch`` at
module level.

Imports llem.devices and below; writes idle baselines and GPU crash records (llem's cache).
"""

from llem.measure.devices import DeviceInfo
from llem.measure.idle import IdleCache
from llem.measure.measurement import Measurement
from llem.measure.session import MeasurementSession
from llem.measure.timeseries import TIMESERIES_COLUMNS

__all__ = ["DeviceInfo", "IdleCache", "Measurement", "MeasurementSession", "TIMESERIES_COLUMNS"]
