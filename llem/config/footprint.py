"""The ``carbon:``, ``cost:``, ``facility:`` and ``chassis:`` sections: the layers beyond the
measurement boundary, and the carbon and money a run's energy and time stand for.

Every field is off by default: llem never presents a default grid intensity, price or PUE as a
fact. What each figure is computed from, and which layers are measured or modelled, is
``docs/footprint.md``; the result's sections are ``llem.result.footprint``.

- ``carbon.intensity_g_per_kwh`` (a number the user gives, with ``carbon.label`` naming where it
  comes from) or ``carbon.country`` (an ISO 3166-1 alpha-3 code resolved offline in CodeCarbon's
  bundled ``global_energy_mix.json``; the ``carbon`` extra). Location-based unless
  ``carbon.market_based=true`` says the user's own number is a market-based factor.
- ``carbon.zone``: an ElectricityMaps zone whose intensity for the window's hour its API gives
  (``carbon.electricitymaps_url``; the key from the environment only), one of the three.
- ``cost.usd_per_kwh`` (energy cost), ``cost.usd_per_gpu_hour`` and ``cost.usd_per_node_hour``
  (capacity cost, from the window's duration and the GPUs the run used).
- ``facility.pue``: the facility layer, a measured or modelled layer times the PUE (modelled,
  always).
- ``chassis.source``: ``none``; ``auto`` (the BMC's DCMI power reading through ``ipmitool`` where
  it answers, else the layer is null with the reason); ``ipmitool`` (the same, refused in
  pre-flight where it does not answer); ``model`` (a stated model over the widest measured layer:
  PSU efficiency, a fixed share for fans and other parts, a user's own watts).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from enum import Enum

from llem.config.knobs import LLEM, knob, show


class ChassisSource(Enum):
    none = "none"
    auto = "auto"
    ipmitool = "ipmitool"
    freeipmi = "freeipmi"
    redfish = "redfish"
    model = "model"


@dataclass
class CarbonConfig:
    intensity_g_per_kwh: float | None = knob(
        None,
        doc="Grid carbon intensity (gCO2e/kWh) the user gives; null: no carbon figures unless "
        "carbon.country is set.",
        goes_to=LLEM,
        ge=0,
    )
    label: str | None = knob(
        None,
        doc="Where carbon.intensity_g_per_kwh comes from, recorded with it (e.g. 'grid operator "
        "2025 average').",
        goes_to=LLEM,
    )
    country: str | None = knob(
        None,
        doc="ISO 3166-1 alpha-3 country code (e.g. FRA) whose annual grid intensity is read "
        "offline from CodeCarbon's bundled data (needs the `carbon` extra).",
        goes_to=LLEM,
        placeholder="ISO3",
    )
    zone: str | None = knob(
        None,
        doc="ElectricityMaps zone (e.g. DE, FR, US-CAL-CISO) whose grid intensity for the "
        "window's hour is asked of its API after the window (key from ELECTRICITYMAPS_API_KEY, "
        "or the file ELECTRICITYMAPS_API_KEY_FILE names); location-based.",
        goes_to=LLEM,
        placeholder="ZONE",
    )
    electricitymaps_url: str = knob(
        "https://api.electricitymaps.com",
        doc="carbon.zone: the ElectricityMaps API's base URL (its /v3/carbon-intensity/latest "
        "and /past are asked).",
        goes_to=LLEM,
    )
    market_based: bool = knob(
        False,
        doc="carbon.intensity_g_per_kwh is a market-based factor (contracts, certificates); "
        "false: location-based.",
        goes_to=LLEM,
    )
    layer: str | None = knob(
        None,
        doc="The layer whose energy carbon and energy cost use (gpu, node, chassis, facility); "
        "null: the widest measured one.",
        goes_to=LLEM,
    )


@dataclass
class CostConfig:
    usd_per_kwh: float | None = knob(
        None, doc="Energy price (USD/kWh); null: no energy cost.", goes_to=LLEM, ge=0
    )
    usd_per_gpu_hour: float | None = knob(
        None,
        doc="Capacity price per GPU-hour (USD), times the window's hours and the run's GPUs; "
        "null: none.",
        goes_to=LLEM,
        ge=0,
    )
    usd_per_node_hour: float | None = knob(
        None,
        doc="Capacity price per node-hour (USD), times the window's hours; null: none.",
        goes_to=LLEM,
        ge=0,
    )


@dataclass
class FacilityConfig:
    pue: float | None = knob(
        None,
        doc="Power usage effectiveness of the facility (>= 1): the facility layer is the widest "
        "other layer times it (modelled, always); null: no facility layer.",
        goes_to=LLEM,
        ge=1,
    )


@dataclass
class ChassisConfig:
    source: ChassisSource = knob(
        ChassisSource.none,
        doc="The chassis layer at the wall: none; auto (the BMC's DCMI power reading through "
        "ipmitool, or FreeIPMI where only it is installed, where the BMC answers, else null with "
        "the reason); ipmitool or freeipmi (that tool, refused in pre-flight where it does not "
        "answer); redfish (the BMC's Redfish resource at chassis.redfish_url, refused in "
        "pre-flight where it does not answer); model (chassis.psu_efficiency and the parts "
        "below).",
        goes_to=LLEM,
    )
    redfish_url: str | None = knob(
        None,
        doc="chassis.source=redfish: the chassis's Redfish power resource, e.g. "
        "https://BMC/redfish/v1/Chassis/1/Power or .../EnvironmentMetrics (credentials from "
        "REDFISH_USERNAME and REDFISH_PASSWORD).",
        goes_to=LLEM,
        placeholder="URL",
    )
    redfish_verify_tls: bool = knob(
        True,
        doc="chassis.source=redfish: check the BMC's TLS certificate (false for a BMC's "
        "self-signed one, the user's choice).",
        goes_to=LLEM,
    )
    interval_s: float = knob(
        1.0,
        doc="Seconds between two BMC power readings (a BMC refreshes about once a second).",
        goes_to=LLEM,
        gt=0,
    )
    psu_efficiency: float | None = knob(
        None,
        doc="chassis.source=model: the power supplies' efficiency (0 to 1, e.g. 0.94), "
        "wall = (layer x (1 + other_share) + other_w x window) / psu_efficiency.",
        goes_to=LLEM,
        gt=0,
        le=1,
    )
    other_share: float = knob(
        0.0,
        doc="chassis.source=model: fans and other parts as a share of the modelled layer's energy.",
        goes_to=LLEM,
        ge=0,
    )
    other_w: float = knob(
        0.0,
        doc="chassis.source=model: the user's own watts for the parts outside the layer.",
        goes_to=LLEM,
        ge=0,
    )


LAYERS = ("gpu", "node", "chassis", "facility")
ZONE = re.compile(r"[A-Za-z]{2}(-[A-Za-z0-9]+)*")


def footprint_problems(carbon: CarbonConfig, chassis: ChassisConfig) -> list[str]:
    """The rules between these sections' fields, each naming its keys and what is allowed."""
    p: list[str] = []
    given = {
        "carbon.intensity_g_per_kwh": carbon.intensity_g_per_kwh,
        "carbon.country": carbon.country,
        "carbon.zone": carbon.zone,
    }
    both = [f"{key}={show(value)}" for key, value in given.items() if value is not None]
    if len(both) > 1:
        p.append(f"{' and '.join(both)} each give the grid intensity (set one)")
    if carbon.market_based and carbon.intensity_g_per_kwh is None:
        p.append(
            "carbon.market_based=true needs carbon.intensity_g_per_kwh (a market-based factor "
            "is the user's own; country data are location-based)"
        )
    if carbon.country is not None and not (len(carbon.country) == 3 and carbon.country.isalpha()):
        p.append(
            f"carbon.country={carbon.country} is not an ISO 3166-1 alpha-3 code "
            "(allowed: three letters, e.g. FRA, USA, DEU)"
        )
    if carbon.zone is not None and not ZONE.fullmatch(carbon.zone):
        p.append(
            f"carbon.zone={carbon.zone} is not an ElectricityMaps zone (allowed: letters, digits "
            "and dashes, e.g. DE, FR, US-CAL-CISO)"
        )
    if not carbon.electricitymaps_url.startswith(("http://", "https://")):
        p.append(
            f"carbon.electricitymaps_url={carbon.electricitymaps_url} is not an http:// or "
            "https:// URL"
        )
    if carbon.layer is not None and carbon.layer not in LAYERS:
        p.append(f"carbon.layer={carbon.layer} is not a layer (allowed: {', '.join(LAYERS)})")
    p.extend(_redfish_problems(chassis))
    if chassis.source == ChassisSource.model and chassis.psu_efficiency is None:
        p.append("chassis.source=model needs chassis.psu_efficiency (0 to 1, e.g. 0.94)")
    modelled = {
        "psu_efficiency": chassis.psu_efficiency,
        "other_share": chassis.other_share or None,
        "other_w": chassis.other_w or None,
    }
    if chassis.source != ChassisSource.model:
        p.extend(
            f"chassis.{name}={show(value)} applies to chassis.source=model only (it is "
            f"chassis.source={chassis.source.value})"
            for name, value in modelled.items()
            if value is not None
        )
    return p


def _redfish_problems(chassis: ChassisConfig) -> list[str]:
    url = chassis.redfish_url
    if chassis.source == ChassisSource.redfish and not url:
        return [
            "chassis.source=redfish needs chassis.redfish_url (the chassis's Redfish power "
            "resource, e.g. https://BMC/redfish/v1/Chassis/1/Power)"
        ]
    if not url:
        return []
    if "@" in url.split("://", 1)[-1].split("/", 1)[0]:  # never printed back: it holds them
        return [
            "chassis.redfish_url holds credentials (user:password@host): give them in "
            "REDFISH_USERNAME and REDFISH_PASSWORD instead, never in the config"
        ]
    if chassis.source != ChassisSource.redfish:
        return [
            f"chassis.redfish_url={url} applies to chassis.source=redfish only "
            f"(it is chassis.source={chassis.source.value})"
        ]
    if not url.startswith(("http://", "https://")):
        return [f"chassis.redfish_url={url} is not an http:// or https:// URL"]
    return []


def footprint_hash_defaults() -> dict[str, dict[str, object]]:
    """These sections' keys at their defaults, as the config hash leaves them out (sweeps written
    before the sections existed keep their points' hashes)."""
    out: dict[str, dict[str, object]] = {}
    for name, cls in (
        ("chassis", ChassisConfig),
        ("facility", FacilityConfig),
        ("carbon", CarbonConfig),
        ("cost", CostConfig),
    ):
        out[name] = {k: (v.value if isinstance(v, Enum) else v) for k, v in asdict(cls()).items()}
    return out
