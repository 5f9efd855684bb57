"""result.json's ``layers`` and ``footprint`` sections: energy from the GPU board to the facility,
and the carbon and money it stands for (``docs/footprint.md``).

``layers``: one energy figure per layer over the measured window (J, idle power included), each
with its label (``measured`` or ``modelled``) and its source (the reading, or the model with its
parameters):

- ``gpu_j``: the run's GPUs (``boundary.gpu_j``), measured;
- ``node_j``: those plus the CPU packages and DRAM (``boundary.total_j`` under
  ``measurement.boundary=node``), measured;
- ``chassis_j``: the chassis at the wall, measured through the BMC (``chassis.source=auto`` or
  ``ipmitool``, or its Redfish service: ``redfish``) or modelled (``chassis.source=model``,
  ``chassis_parameters``);
- ``facility_j``: the widest other layer times ``facility.pue``, modelled always.

A layer that was not asked for, or not measured here, is null with the reason in
``null_reasons["layers.<layer>_j"]``. ``widest_measured`` names the widest measured layer.

``footprint``: the figures of ``layer`` (``carbon.layer``, by default the widest measured one;
never a modelled layer unless the user names it, and then ``layer_label`` says ``modelled``):
grams of CO2e (``energy_j`` / 3.6e6 x ``intensity_g_per_kwh``) in total and per output token,
per 1,000 output tokens, per request and per correct answer (where quality was scored); the
energy cost (``usd_per_kwh``) and the capacity cost (``usd_per_gpu_hour`` x GPUs +
``usd_per_node_hour``, times the window's hours) apart, each per million output tokens and per
correct answer. With ``carbon.zone``, ``intensity_hour``, ``intensity_estimated`` and
``intensity_emission_factor_type`` say which hour ElectricityMaps' intensity is for, whether it
estimated it, and whether its factors are lifecycle or direct (null otherwise). Carbon and
energy cost carry the layer's bound, scaled the same way (the intensity and prices are taken as
exact: they are the user's, or the data's, numbers). A figure that cannot
be given is null with its reason (energy unavailable: carbon and energy cost null, while the
capacity cost, from the window's duration, is still given).

Added without a schema version of their own: both default to null (older files load unchanged).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from llem.result.figure import bound, check_bounds, figure, figure_specs

MEASURED = "measured"
MODELLED = "modelled"


@dataclass(frozen=True)
class Layers:
    gpu_label: str | None = None  # measured | modelled (null: no figure)
    gpu_source: str | None = None
    gpu_j: float | None = figure(bounded=True)
    gpu_j_uncertainty: float | None = bound()
    node_label: str | None = None
    node_source: str | None = None
    node_j: float | None = figure(bounded=True)
    node_j_uncertainty: float | None = bound()
    chassis_label: str | None = None
    chassis_source: str | None = None
    chassis_parameters: dict[str, float | str] = field(default_factory=dict)
    chassis_readings: int | None = None  # the BMC's readings in the window (measured only)
    chassis_j: float | None = figure(bounded=True)
    chassis_j_uncertainty: float | None = bound()
    chassis_j_uncertainty_components: dict[str, float] = field(default_factory=dict)
    facility_label: str | None = None
    facility_source: str | None = None
    facility_parameters: dict[str, float | str] = field(default_factory=dict)
    facility_j: float | None = figure(bounded=True)
    facility_j_uncertainty: float | None = bound()
    widest_measured: str | None = None  # gpu | node | chassis (null: none measured)

    def __post_init__(self) -> None:
        check_bounds(self)


@dataclass(frozen=True)
class Footprint:
    layer: str | None = None  # the layer the carbon and energy cost use
    layer_label: str | None = None  # measured | modelled
    energy_j: float | None = figure(bounded=True)
    energy_j_uncertainty: float | None = bound()
    intensity_g_per_kwh: float | None = None
    intensity_source: str | None = None  # the user's value and label, or the country data
    intensity_basis: str | None = None  # location | market
    intensity_hour: str | None = None  # the hour it is for (carbon.zone: the window's, UTC)
    intensity_estimated: bool | None = None  # the source estimated that hour (carbon.zone)
    intensity_emission_factor_type: str | None = None  # lifecycle | direct (carbon.zone)
    carbon_g: float | None = figure(bounded=True)
    carbon_g_uncertainty: float | None = bound()
    g_per_output_token: float | None = figure(bounded=True)
    g_per_output_token_uncertainty: float | None = bound()
    g_per_1k_output_tokens: float | None = figure(bounded=True)
    g_per_1k_output_tokens_uncertainty: float | None = bound()
    g_per_request: float | None = figure(bounded=True)
    g_per_request_uncertainty: float | None = bound()
    g_per_correct_answer: float | None = figure(bounded=True)
    g_per_correct_answer_uncertainty: float | None = bound()
    usd_per_kwh: float | None = None
    energy_cost_usd: float | None = figure(bounded=True)
    energy_cost_usd_uncertainty: float | None = bound()
    energy_usd_per_million_output_tokens: float | None = figure(bounded=True)
    energy_usd_per_million_output_tokens_uncertainty: float | None = bound()
    energy_usd_per_correct_answer: float | None = figure(bounded=True)
    energy_usd_per_correct_answer_uncertainty: float | None = bound()
    usd_per_gpu_hour: float | None = None
    usd_per_node_hour: float | None = None
    gpus: int | None = None  # GPUs the capacity cost counts
    capacity_hours: float | None = None  # the measured window, in hours
    capacity_cost_usd: float | None = figure()
    capacity_usd_per_million_output_tokens: float | None = figure()
    capacity_usd_per_correct_answer: float | None = figure()
    price_source: str | None = None  # where the prices come from (the user's cost.* values)

    def __post_init__(self) -> None:
        check_bounds(self)


figure_specs(Layers)
figure_specs(Footprint)
