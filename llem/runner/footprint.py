"""The run's ``layers`` and ``footprint`` sections (``llem.result.footprint``), and their
pre-flight: a chassis that ``chassis.source=ipmitool``, ``freeipmi`` or ``redfish`` asks for but
that gives no reading, and a carbon country that cannot be resolved, are refused before anything
is loaded.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from llem.config.footprint import ChassisSource
from llem.config.schema import ExperimentConfig
from llem.devices.bmc import FREEIPMI, BmcError, IpmitoolReader, dcmi_reader
from llem.devices.redfish import RedfishReader
from llem.errors import PreflightError
from llem.figures.footprint import (
    Layer,
    WorkDone,
    capacity_cost_figures,
    carbon_figures,
    chassis_model,
    energy_cost_figures,
    facility,
    widest_measured,
    widest_with_figure,
)
from llem.measure.chassis import ChassisWindow, WallReader
from llem.result import Figure, RunResult
from llem.result.footprint import MEASURED, MODELLED, Footprint, Layers
from llem.runner import electricitymaps
from llem.runner.grid_intensity import Intensity, resolve

NOT_ASKED = {
    "chassis": "chassis.source=none (auto: the BMC's reading where it answers; model: a stated "
    "model)",
    "facility": "facility.pue is not set",
    "layers": "no layer beyond measurement.boundary asked for (chassis.source, facility.pue; "
    "docs/footprint.md)",
    "footprint": "no carbon intensity and no price given (carbon.*, cost.*)",
}


def wall_reader(exp: ExperimentConfig) -> WallReader | None:
    """The BMC reader the session samples in its window (None: the chassis is not measured)."""
    c = exp.chassis
    if c.source == ChassisSource.redfish and c.redfish_url:
        return RedfishReader(c.redfish_url, verify_tls=c.redfish_verify_tls)
    readers: dict[ChassisSource, Callable[[], WallReader]] = {
        ChassisSource.auto: dcmi_reader,
        ChassisSource.ipmitool: IpmitoolReader,
        ChassisSource.freeipmi: lambda: IpmitoolReader(tool=FREEIPMI),
    }
    return readers[c.source]() if c.source in readers else None


def footprint_preflight(exp: ExperimentConfig, reader: WallReader | None = None) -> list[str]:
    """One line per problem: ``chassis.source=ipmitool`` or ``redfish`` without a reading, a
    carbon country that CodeCarbon's data cannot resolve."""
    problems: list[str] = []
    source = exp.chassis.source
    reader = reader or wall_reader(exp)
    asked = (ChassisSource.ipmitool, ChassisSource.freeipmi, ChassisSource.redfish)
    if source in asked and reader is not None:
        try:
            reader.read_w()
        except BmcError as exc:
            instead = (
                "check chassis.redfish_url and the credentials, or use chassis.source=none"
                if source == ChassisSource.redfish
                else "use chassis.source=auto to record the layer as null instead, or "
                "chassis.source=none"
            )
            problems.append(f"chassis.source={source.value} but {exc} ({instead})")
    try:
        resolve(exp.carbon)
    except PreflightError as exc:
        problems.extend(exc.problems)
    if exp.carbon.zone is not None:
        problems.extend(
            electricitymaps.zone_problems(exp.carbon.zone, exp.carbon.electricitymaps_url)
        )
    return problems


def grid_intensity(
    exp: ExperimentConfig, window_start: datetime | None
) -> tuple[Intensity | None, str]:
    """The intensity the carbon figures use, or None with the reason they are null. An
    ElectricityMaps zone's is asked for here, after the window: where the API gives none, the
    carbon figures are null with its words and the run goes on."""
    zone = exp.carbon.zone
    if zone is None:
        why = (
            "no carbon intensity given (carbon.intensity_g_per_kwh, carbon.country or carbon.zone)"
        )
        return resolve(exp.carbon), why
    if window_start is None:
        return None, f"carbon.zone={zone}: the window's start is unknown (no window measured)"
    try:
        url = exp.carbon.electricitymaps_url
        return electricitymaps.hour_intensity(zone, url, window_start), ""
    except electricitymaps.EmapsError as exc:
        return None, f"no grid intensity for the window's hour: {exc}"


def _boundary_layers(result: RunResult) -> dict[str, Layer]:
    if result.boundary is None:
        why = result.null_reasons.get("boundary", "energy not measured")
        return {n: Layer(n, Figure.null(why), None, None) for n in ("gpu", "node")}
    source = result.energy.source
    gpu_j = result.figure("boundary.gpu_j")
    gpu = Layer("gpu", gpu_j, *((MEASURED, source) if gpu_j.value is not None else (None, None)))
    if result.boundary.boundary == "node":
        node = Layer("node", result.figure("boundary.total_j"), MEASURED, f"{source} + RAPL")
        if node.energy.value is None:
            node = Layer("node", node.energy, None, None)
    else:
        why = "outside measurement.boundary=gpu (measurement.boundary=node measures it)"
        node = Layer("node", Figure.null(why), None, None)
    return {"gpu": gpu, "node": node}


def _chassis(exp: ExperimentConfig, wall: ChassisWindow | None, layers: dict[str, Layer]) -> Layer:
    c = exp.chassis
    if c.source == ChassisSource.model and c.psu_efficiency is not None:
        base = widest_measured(layers) or layers["node" if "node" in layers else "gpu"]
        window_s = 0.0 if wall is None else wall.window_s
        return chassis_model(base, window_s, c.psu_efficiency, c.other_share, c.other_w)
    if c.source == ChassisSource.none:
        return Layer("chassis", Figure.null(NOT_ASKED["chassis"]), None, None)
    if wall is None:
        return Layer("chassis", Figure.null("the window did not read the BMC"), MEASURED, None)
    energy = Figure.of(wall.energy_j, wall.null_reason, wall.uncertainty_j)
    return Layer("chassis", energy, MEASURED, wall.source)


def build_layers(exp: ExperimentConfig, result: RunResult, wall: ChassisWindow | None) -> None:
    """``result.layers``: gpu and node from the boundary, the chassis (measured or modelled),
    the facility (modelled over the widest other layer with a figure)."""
    layers = _boundary_layers(result)
    layers["chassis"] = _chassis(exp, wall, layers)
    if exp.facility.pue is None:
        layers["facility"] = Layer("facility", Figure.null(NOT_ASKED["facility"]), None, None)
    else:
        base = widest_with_figure(layers, "facility")
        layers["facility"] = (
            facility(base, exp.facility.pue)
            if base is not None
            else _facility_without_base(layers, exp.facility.pue)
        )
    widest = widest_measured(layers)
    chassis = layers["chassis"]
    result.layers = Layers(
        gpu_label=layers["gpu"].label,
        gpu_source=layers["gpu"].source,
        node_label=layers["node"].label,
        node_source=layers["node"].source,
        chassis_label=chassis.label,
        chassis_source=chassis.source,
        facility_label=layers["facility"].label,
        facility_source=layers["facility"].source,
        chassis_parameters=chassis.parameters,
        facility_parameters=layers["facility"].parameters,
        chassis_readings=wall.readings if wall is not None and chassis.label == MEASURED else None,
        chassis_j_uncertainty_components=dict(wall.components) if wall is not None else {},
        widest_measured=None if widest is None else widest.name,
    )
    result.set_figures("layers", {f"{n}_j": layer.energy for n, layer in layers.items()})


def _facility_without_base(layers: dict[str, Layer], pue: float) -> Layer:
    """The facility where no other layer has a figure: null, naming why each is null."""
    whys = "; ".join(f"{n}: {layers[n].energy.null_reason}" for n in ("gpu", "node", "chassis"))
    reason = f"no layer has a figure to multiply by the PUE ({whys})"
    return Layer(
        "facility", Figure.null(reason), MODELLED, f"model: layer x PUE {pue:g}", {"pue": pue}
    )


def _layer(result: RunResult, name: str) -> tuple[Figure, str | None]:
    assert result.layers is not None
    return result.figure(f"layers.{name}_j"), getattr(result.layers, f"{name}_label")


def build_footprint(
    exp: ExperimentConfig, result: RunResult, window_start: datetime | None = None
) -> None:
    """``result.footprint`` from the chosen layer's energy, the window and the counts."""
    intensity, no_carbon = grid_intensity(exp, window_start)
    cost = exp.cost
    if (
        intensity is None
        and exp.carbon.zone is None
        and all(
            v is None for v in (cost.usd_per_kwh, cost.usd_per_gpu_hour, cost.usd_per_node_hour)
        )
    ):
        result.null_reasons["footprint"] = NOT_ASKED["footprint"]
        return
    assert result.layers is not None
    name = exp.carbon.layer or result.layers.widest_measured
    if name is None:
        why = (
            "no layer was measured here ("
            + (result.null_reasons.get("layers.gpu_j") or "energy unavailable")
            + ")"
        )
        energy, label = Figure.null(why), None
    else:
        energy, label = _layer(result, name)
    n = _counts(result)
    window_s = result.energy.window_s
    gpus = len(result.boundary.gpus) if result.boundary is not None else 0
    result.footprint = Footprint(
        layer=name,
        layer_label=label,
        **_intensity_fields(intensity),
        usd_per_kwh=cost.usd_per_kwh,
        usd_per_gpu_hour=cost.usd_per_gpu_hour,
        usd_per_node_hour=cost.usd_per_node_hour,
        gpus=gpus if cost.usd_per_gpu_hour is not None else None,
        capacity_hours=None if window_s is None else window_s / 3600,
        price_source="user values (cost.*)"
        if cost.usd_per_kwh or cost.usd_per_gpu_hour or cost.usd_per_node_hour
        else None,
    )
    figures: dict[str, Figure] = {"energy_j": energy}
    figures.update(
        carbon_figures(energy, intensity.g_per_kwh, n)
        if intensity is not None
        else dict.fromkeys(carbon_figures(energy, 0.0, n), Figure.null(no_carbon))
    )
    no_price = "no energy price given (cost.usd_per_kwh)"
    figures.update(
        energy_cost_figures(energy, cost.usd_per_kwh, n)
        if cost.usd_per_kwh is not None
        else dict.fromkeys(energy_cost_figures(energy, 0.0, n), Figure.null(no_price))
    )
    figures.update(_capacity(cost.usd_per_gpu_hour, cost.usd_per_node_hour, gpus, window_s, n))
    result.set_figures("footprint", figures)  # type: ignore[arg-type]


def _intensity_fields(intensity: Intensity | None) -> dict[str, Any]:
    """The footprint's fields that say which intensity was used (all null where none was)."""
    if intensity is None:
        return {}
    return {
        "intensity_g_per_kwh": intensity.g_per_kwh,
        "intensity_source": intensity.source,
        "intensity_basis": intensity.basis,
        "intensity_hour": intensity.hour,
        "intensity_estimated": intensity.estimated,
        "intensity_emission_factor_type": intensity.emission_factor_type,
    }


def _counts(result: RunResult) -> WorkDone:
    q = result.quality
    return WorkDone(
        result.workload.output_tokens or 0,
        result.workload.requests or 0,
        None if q is None else q.n_correct,
        result.null_reasons.get("quality", "quality was not scored (dataset=arithmetic scores)"),
    )


def _capacity(
    per_gpu_h: float | None,
    per_node_h: float | None,
    gpus: int,
    window_s: float | None,
    n: WorkDone,
) -> dict[str, Figure]:
    names = capacity_cost_figures(0.0, n)
    if per_gpu_h is None and per_node_h is None:
        why = "no capacity price given (cost.usd_per_gpu_hour, cost.usd_per_node_hour)"
        return dict.fromkeys(names, Figure.null(why))
    if window_s is None:
        return dict.fromkeys(names, Figure.null("the window's duration is unknown"))
    if per_gpu_h is not None and per_node_h is None and gpus == 0:
        why = "cost.usd_per_gpu_hour is set but the run measured no GPU"
        return dict.fromkeys(names, Figure.null(why))
    usd = window_s / 3600 * ((per_gpu_h or 0.0) * gpus + (per_node_h or 0.0))
    return capacity_cost_figures(usd, n)


def fill_footprint(
    exp: ExperimentConfig,
    result: RunResult,
    wall: ChassisWindow | None,
    window_start: datetime | None = None,
) -> None:
    """Both sections, once the window's energy and the quality are in the result; null with the
    reason where nothing beyond the boundary was asked for. ``window_start``: the window's start
    on the wall clock, whose hour an ElectricityMaps zone's intensity is asked for."""
    cost = exp.cost
    asked = (
        exp.chassis.source != ChassisSource.none
        or exp.facility.pue is not None
        or exp.carbon.zone is not None
        or resolve(exp.carbon) is not None
        or any(
            v is not None for v in (cost.usd_per_kwh, cost.usd_per_gpu_hour, cost.usd_per_node_hour)
        )
    )
    if not asked:
        result.null_reasons["layers"] = NOT_ASKED["layers"]
        result.null_reasons["footprint"] = NOT_ASKED["footprint"]
        return
    build_layers(exp, result, wall)
    build_footprint(exp, result, window_start)
