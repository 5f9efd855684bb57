"""The chassis layer measured at the wall: the BMC's power readings sampled over the window.

A ``ChassisMeter`` reads its source (``llem.devices.bmc.IpmitoolReader`` or
``llem.devices.redfish.RedfishReader``) once at each edge of the
window and every ``chassis.interval_s`` in between on a sampler thread of its own (a BMC answers
in tenths of a second, too slow for the GPU sampler's rate), and integrates the readings over the
window with the trapezoid rule (``llem.measure.integrate``). Each reading is stamped with the
instant its call returned.

The bound (worst case, J) is the sum of:

* ``trapezoid_j``: a step change between two readings, ``sum |dP| x dt / 2`` (as for a GPU's
  sampled power, ``llem.measure.uncertainty``);
* ``resolution_j``: the reader's resolution (whole watts, ipmitool's and Redfish's alike),
  ``resolution_w / 2 x window_s``.

Not covered: the BMC's sensor accuracy (DCMI states none; it is the vendor's), the delay between
the BMC's own sampling and the read, and power that rises and falls between two readings. A
reading that fails mid-window voids the layer (null with the reason), nothing else.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Protocol

from llem.devices.bmc import COMMAND_TEXT, BmcError, no_bmc_reason
from llem.measure.integrate import integrate_linear
from llem.measure.sampler import Clock, Sampler
from llem.measure.uncertainty import trapezoid_bound_j


class WallReader(Protocol):
    source: str  # what is read, as the layer records it (a command, a URL)
    resolution_w: float  # the smallest step of a reading (W)

    def read_w(self) -> float:
        """One reading of the chassis's power (W); raises ``BmcError`` with the reason."""
        ...


@dataclass(frozen=True)
class ChassisWindow:
    """The chassis's energy over one window (J), or None with ``null_reason``."""

    energy_j: float | None
    uncertainty_j: float | None = None
    components: dict[str, float] = field(default_factory=dict)
    readings: int = 0
    window_s: float = 0.0
    source: str = COMMAND_TEXT
    null_reason: str | None = None


class ChassisMeter:
    """``begin(start)`` at the window's start, ``end(end)`` at its end (session-clock seconds)."""

    def __init__(self, reader: WallReader, clock: Clock, interval_s: float) -> None:
        self.reader = reader
        self.clock = clock
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._points: list[tuple[float, float]] = []
        self._failure: str | None = None
        self._sampler: Sampler | None = None
        self._start = 0.0

    def _read(self, _now: float | None = None) -> None:
        if self._failure is not None:
            return
        try:
            watts = self.reader.read_w()
        except BmcError as exc:
            with self._lock:
                self._failure = no_bmc_reason(exc)
            return
        with self._lock:
            self._points.append((self.clock.now(), watts))

    def begin(self, start: float) -> None:
        self._start = start
        self._read()
        self._sampler = Sampler(self._read, 1.0 / self.interval_s, self.clock)
        self._sampler.start(start)

    def end(self, end: float) -> ChassisWindow:
        if self._sampler is not None:
            self._sampler.stop()
            if self._sampler.error is not None and self._failure is None:
                self._failure = f"chassis sampler stopped: {self._sampler.error}"
        self._read()
        reader = self.reader
        return integrate_window(
            self._points, self._start, end, self._failure, reader.resolution_w, reader.source
        )


def integrate_window(
    points: list[tuple[float, float]],
    start: float,
    end: float,
    failure: str | None,
    resolution_w: float,
    source: str,
) -> ChassisWindow:
    """The chassis's energy over ``[start, end]`` from ``(instant, W)`` readings, with its bound."""
    window_s = end - start
    if failure is not None:
        return ChassisWindow(
            None, window_s=window_s, readings=len(points), source=source, null_reason=failure
        )
    pts = sorted(points)
    if len(pts) < 2:
        why = "fewer than 2 BMC readings"
        return ChassisWindow(
            None, window_s=window_s, readings=len(pts), source=source, null_reason=why
        )
    times = [t for t, _ in pts]
    watts = [w for _, w in pts]
    joules = integrate_linear(times, watts, start, end)
    parts = {
        "trapezoid_j": trapezoid_bound_j(times, watts),
        "resolution_j": resolution_w / 2 * window_s,
    }
    return ChassisWindow(joules, sum(parts.values()), parts, len(pts), window_s, source)
