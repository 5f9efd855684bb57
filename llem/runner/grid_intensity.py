"""The grid carbon intensity a run's carbon figures use, and where it comes from.

``carbon.intensity_g_per_kwh``: the user's number, recorded with ``carbon.label``.
``carbon.country``: the country's annual figure in CodeCarbon's bundled
``codecarbon/data/private_infra/global_energy_mix.json`` (keys: ISO 3166-1 alpha-3 codes; field
``carbon_intensity`` in gCO2e/kWh, with its ``year``), read as a file of the installed package,
offline and without importing it. A code the data do not hold is refused (CodeCarbon itself
would fall back to the world average without a word).
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

from llem.config.footprint import CarbonConfig
from llem.errors import PreflightError

DATA = Path("data") / "private_infra" / "global_energy_mix.json"
CARBON_INSTALL = "pip install 'llem[carbon]' (CodeCarbon's bundled grid data)"


@dataclass(frozen=True)
class Intensity:
    g_per_kwh: float
    source: str
    basis: str  # location | market
    hour: str | None = None  # the hour it is for (ElectricityMaps: the window's, UTC)
    estimated: bool | None = None  # the source estimated it (None: not stated, or not hourly)
    emission_factor_type: str | None = None  # lifecycle | direct (None: not stated)


def _data_file() -> Path | None:
    spec = importlib.util.find_spec("codecarbon")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / DATA


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("codecarbon")
    except PackageNotFoundError:
        return "version unknown"


def country_intensity(code: str) -> Intensity:
    """The country's intensity from CodeCarbon's data; ``PreflightError`` in one line where
    CodeCarbon is not installed or its data do not hold the code."""
    path = _data_file()
    if path is None:
        raise PreflightError([f"carbon.country={code} needs CodeCarbon: {CARBON_INSTALL}"])
    try:
        mix = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PreflightError([f"carbon.country={code}: cannot read {path} ({exc})"]) from None
    entry = mix.get(code.upper())
    if not isinstance(entry, dict) or not isinstance(entry.get("carbon_intensity"), (int, float)):
        raise PreflightError(
            [
                f"carbon.country={code} is not a country in CodeCarbon's grid data (allowed: an "
                f"ISO 3166-1 alpha-3 code it holds, e.g. FRA, USA, DEU; {len(mix)} codes in "
                f"{path.name})"
            ]
        )
    name = entry.get("country_name", code.upper())
    year = entry.get("year", "year not stated")
    return Intensity(
        float(entry["carbon_intensity"]),
        f"CodeCarbon {_version()} global_energy_mix.json: {code.upper()} ({name}), {year} "
        "annual average",
        "location",
    )


def resolve(carbon: CarbonConfig) -> Intensity | None:
    """The intensity the config asks for (None: no carbon figures asked for)."""
    if carbon.country is not None:
        return country_intensity(carbon.country)
    if carbon.intensity_g_per_kwh is None:
        return None
    label = carbon.label or "no label given"
    return Intensity(
        float(carbon.intensity_g_per_kwh),
        f"user value (carbon.intensity_g_per_kwh): {label}",
        "market" if carbon.market_based else "location",
    )
