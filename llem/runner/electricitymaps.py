"""The grid intensity of an ElectricityMaps zone for the window's hour, from its API.

The only caller of ElectricityMaps. ``carbon.zone`` names the zone, ``carbon.electricitymaps_url``
the API's base. The key comes from the environment alone (``ELECTRICITYMAPS_API_KEY``, or the
file ``ELECTRICITYMAPS_API_KEY_FILE`` names), is sent in the ``auth-token`` header the API
documents and is never written anywhere.

- Pre-flight asks ``/v3/carbon-intensity/latest?zone=Z`` once (``zone_problems``): a refused key
  (401, 403), a zone the API does not know (400, 404) or a server that does not answer is one
  line, before anything is measured.
- After the window, ``/v3/carbon-intensity/past?zone=Z&datetime=H`` gives the intensity for the
  window's hour ``H`` (its start, UTC, floored to the hour: the API's granularity is an hour):
  ``{"zone", "carbonIntensity" (gCO2eq/kWh), "datetime", "emissionFactorType" (lifecycle |
  direct), "isEstimated", "estimationMethod", ...}``. ElectricityMaps' intensity is that of the
  zone's consumption mix: location-based.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from llem.runner.grid_intensity import Intensity

KEY_ENV = "ELECTRICITYMAPS_API_KEY"
KEY_FILE_ENV = "ELECTRICITYMAPS_API_KEY_FILE"
LATEST = "/v3/carbon-intensity/latest"
PAST = "/v3/carbon-intensity/past"
#: seconds one request may take before it counts as failed
API_TIMEOUT_S = 10.0


class EmapsError(Exception):
    """One line saying why ElectricityMaps gave no intensity (never holding the key)."""


def electricitymaps_key(environ: Mapping[str, str] | None = None) -> str | None:
    """The ElectricityMaps API key from the environment, or the file it names; None where neither
    gives one."""
    env = os.environ if environ is None else environ
    if env.get(KEY_ENV, "").strip():
        return env[KEY_ENV].strip()
    path = env.get(KEY_FILE_ENV, "").strip()
    if not path:
        return None
    try:
        return Path(path).read_text(encoding="utf-8").strip() or None
    except OSError as exc:
        raise EmapsError(f"{KEY_FILE_ENV}={path} cannot be read ({exc.strerror})") from None


def window_hour(start: datetime) -> datetime:
    """The hour the API is asked for: the window's start in UTC, floored to the hour."""
    utc = start.astimezone(timezone.utc) if start.tzinfo else start.replace(tzinfo=timezone.utc)
    return utc.replace(minute=0, second=0, microsecond=0)


def _iso(hour: datetime) -> str:
    return hour.strftime("%Y-%m-%dT%H:%M:%SZ")


def _message(err: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(err.read().decode("utf-8", errors="replace"))
    except (OSError, ValueError):
        body = None
    said = body.get("message") or body.get("error") if isinstance(body, dict) else None
    return " ".join(str(said or err.reason or "").split())


def get(base_url: str, path: str, params: dict[str, str], key: str) -> dict[str, Any]:
    """One GET of the API; ``EmapsError`` in one line naming what to set where it refuses."""
    url = f"{base_url.rstrip('/')}{path}?{urllib.parse.urlencode(params)}"
    request = urllib.request.Request(url, headers={"auth-token": key, "Accept": "application/json"})
    zone = params.get("zone", "")
    try:
        with urllib.request.urlopen(request, timeout=API_TIMEOUT_S) as answer:
            body = json.loads(answer.read().decode("utf-8", errors="replace"))
    except urllib.error.HTTPError as err:
        said = f"ElectricityMaps GET {url} answered HTTP {err.code}: {_message(err)}"
        if err.code in (401, 403):
            raise EmapsError(f"{said} (check the key in {KEY_ENV})") from None
        if err.code in (400, 404):
            raise EmapsError(f"carbon.zone={zone}: {said} (check the zone's name)") from None
        raise EmapsError(said) from None
    except (OSError, ValueError) as exc:  # URLError, a timeout, a body that is not JSON
        why = getattr(exc, "reason", None) or exc
        raise EmapsError(f"ElectricityMaps GET {url} failed: {why}") from None
    if not isinstance(body, dict):
        raise EmapsError(f"ElectricityMaps GET {url} answered without a JSON object")
    return body


def zone_problems(zone: str, base_url: str, environ: Mapping[str, str] | None = None) -> list[str]:
    """One line per problem with the key or the zone, from one request for the latest hour."""
    try:
        key = electricitymaps_key(environ)
        if key is None:
            return [
                f"carbon.zone={zone} needs an ElectricityMaps API key: set {KEY_ENV} (or "
                f"{KEY_FILE_ENV} to a file holding it)"
            ]
        get(base_url, LATEST, {"zone": zone}, key)
    except EmapsError as exc:
        return [str(exc)]
    return []


def hour_intensity(
    zone: str, base_url: str, start: datetime, environ: Mapping[str, str] | None = None
) -> Intensity:
    """The zone's intensity for the hour the window started in; ``EmapsError`` where the API
    gives none."""
    hour = window_hour(start)
    key = electricitymaps_key(environ)
    if key is None:
        raise EmapsError(f"no ElectricityMaps API key in {KEY_ENV} after the window")
    body = get(base_url, PAST, {"zone": zone, "datetime": _iso(hour)}, key)
    value = body.get("carbonIntensity")
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise EmapsError(f"ElectricityMaps gave no carbonIntensity for zone {zone} at {_iso(hour)}")
    factors = body.get("emissionFactorType") or "emission factor type not stated"
    estimated = body.get("isEstimated")
    how = (
        "estimated"
        if estimated is True
        else "measured"
        if estimated is False
        else "estimation not stated"
    )
    if estimated and body.get("estimationMethod"):
        how += f" ({body['estimationMethod']})"
    return Intensity(
        float(value),
        f"ElectricityMaps zone {body.get('zone') or zone}, hour {_iso(hour)} (the window's start, "
        f"UTC, floored), {factors} emission factors, {how}, location-based",
        "location",
        hour=_iso(hour),
        estimated=estimated if isinstance(estimated, bool) else None,
        emission_factor_type=body.get("emissionFactorType") or None,
    )
