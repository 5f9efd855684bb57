"""result.json's ``boundary`` section (schema 6): what the run's energy covers and what it leaves
out, with each component's energy.

``boundary`` is ``measurement.boundary``: ``gpu`` (the GPUs the run uses) or ``node`` (those GPUs
plus this host's CPU packages and DRAM, read through RAPL over the same window). ``gpus`` are the
measured GPUs by UUID, ``cpu_packages`` and ``dram`` the RAPL domains read (package-N, dram-N;
empty where none could be read), ``cpu_packages_note`` which packages the process may run on next
to those read, ``outside`` one sentence per thing the figures leave out, ``includes`` one sentence
per thing they take in that the components do not say (a server's: whose processes ran on the
measured GPUs, and that any other work there is in the figures too; empty for the in-process
engines, and in results written before it; a CPU run's node with no GPU names its RAPL domains).

Energy per component over the measured window (J, idle power included, as ``energy.total_j``):
``gpu_j`` (``energy.total_j``), ``cpu_package_j``, ``dram_j`` and their sum ``total_j``; the
``idle_adjusted`` figures subtract each component's idle power times the window, as
``energy.idle_adjusted_j`` does for the GPUs; the ``j_per_output_token`` figures divide by the
window's output tokens. A component outside the boundary, or that could not be read, is null with
the reason in ``null_reasons["boundary.<field>"]``, and so is any total it would be part of;
a part the host does not have (a CPU's missing DRAM domain; the GPUs of a CPU run on a host where
no GPU library starts) is listed in ``outside`` instead, and the total is the rest.

Bounds (worst case, J, ``X_uncertainty``): ``gpu_j``'s is ``energy.total_j_uncertainty``, and so
is ``total_j``'s where the GPUs are all it holds (``boundary=gpu``, or a node whose packages and
DRAM are outside); ``j_per_output_token``'s is the total's over the tokens. RAPL states no
accuracy, so ``cpu_package_j``, ``dram_j`` and any total holding them have a null bound whose
reason says so and gives what is known: ``rapl_reading_limits_j``, the part of the RAPL figures'
error that llem can bound (the counters' resolution, update period and reads just outside the
window: ``llem.measure.rapl_bound``), which is not a bound of the figures. The idle-adjusted and
per-component per-token figures carry no bound (the GPUs' are in ``energy``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from llem.result.figure import bound, figure, figure_specs


@dataclass(frozen=True)
class Boundary:
    boundary: str = "gpu"  # gpu | node (measurement.boundary)
    gpus: list[str] = field(default_factory=list)  # UUIDs measured
    cpu_packages: list[str] = field(default_factory=list)  # RAPL domains read: package-N
    cpu_packages_note: str | None = None  # the packages the process may run on
    dram: list[str] = field(default_factory=list)  # RAPL domains read: dram-N
    outside: list[str] = field(default_factory=list)  # what the figures leave out
    includes: list[str] = field(default_factory=list)  # whose work they take in (a server's)
    gpu_j: float | None = figure(bounded=True)
    cpu_package_j: float | None = figure(bounded=True)
    dram_j: float | None = figure(bounded=True)
    total_j: float | None = figure(bounded=True)
    gpu_idle_adjusted_j: float | None = figure()
    cpu_package_idle_adjusted_j: float | None = figure()
    dram_idle_adjusted_j: float | None = figure()
    idle_adjusted_j: float | None = figure()
    gpu_j_per_output_token: float | None = figure()
    cpu_package_j_per_output_token: float | None = figure()
    dram_j_per_output_token: float | None = figure()
    j_per_output_token: float | None = figure(bounded=True)
    rapl_reading_limits_j: float | None = figure()  # bounded part of the RAPL figures' error
    gpu_j_uncertainty: float | None = bound()
    cpu_package_j_uncertainty: float | None = bound()
    dram_j_uncertainty: float | None = bound()
    total_j_uncertainty: float | None = bound()
    j_per_output_token_uncertainty: float | None = bound()


figure_specs(Boundary)
