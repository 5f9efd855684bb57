"""The chassis's power at the wall, as a BMC that speaks Redfish (DMTF's HTTP API) reports it.

The only caller of a Redfish service. ``chassis.redfish_url`` names the resource to read, one of
the two shapes Redfish gives a chassis's power in:

- ``EnvironmentMetrics`` (``/redfish/v1/Chassis/{id}/EnvironmentMetrics``, Redfish 2020.4 on):
  ``{"PowerWatts": {"Reading": 412.5, ...}}``;
- ``Power`` (``/redfish/v1/Chassis/{id}/Power``, the older schema most BMCs still serve):
  ``{"PowerControl": [{"PowerConsumedWatts": 590, ...}, ...]}``; the first member with a reading.

The user name and password come from the environment (``REDFISH_USERNAME``,
``REDFISH_PASSWORD``), are sent as HTTP Basic authentication and are never written anywhere.
A service that refuses (401, 403) or has no such resource (404) answers with Redfish's error body
(``{"error": {"code": ..., "message": ..., "@Message.ExtendedInfo": [{"Message": ...}]}}``):
its message is the reason, in one line. A host where nothing answers at the URL is "no BMC".
Redfish states no resolution for a reading; BMCs report whole watts, so a reading is taken as
off by up to half a watt, as ipmitool's is.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from llem.devices.bmc import BmcError

USER_ENV = "REDFISH_USERNAME"
PASSWORD_ENV = "REDFISH_PASSWORD"
#: seconds one reading may take before it counts as failed
TIMEOUT_S = 5.0
#: BMCs report whole watts (Redfish states no resolution): each reading off by up to 0.5 W
RESOLUTION_W = 1.0

Getter = Callable[[urllib.request.Request, float, "ssl.SSLContext | None"], Any]


def _get(request: urllib.request.Request, timeout_s: float, context: ssl.SSLContext | None) -> Any:
    with urllib.request.urlopen(request, timeout=timeout_s, context=context) as answer:
        return json.loads(answer.read().decode("utf-8", errors="replace"))


def parse_power(body: Any) -> float:
    """The chassis's power (W) in a Redfish ``EnvironmentMetrics`` or ``Power`` resource;
    ``BmcError`` where it holds none."""
    if isinstance(body, Mapping):
        watts = body.get("PowerWatts")
        if isinstance(watts, Mapping) and isinstance(watts.get("Reading"), int | float):
            return float(watts["Reading"])
        for member in body.get("PowerControl") or ():
            if isinstance(member, Mapping):
                consumed = member.get("PowerConsumedWatts")
                if isinstance(consumed, int | float) and not isinstance(consumed, bool):
                    return float(consumed)
    raise BmcError(
        "answered without a power reading (neither PowerWatts.Reading nor "
        "PowerControl[].PowerConsumedWatts)"
    )


def error_message(text: str) -> str | None:
    """The first message of a Redfish error body, or None where the text is not one."""
    try:
        error = json.loads(text).get("error", {})
    except (ValueError, AttributeError):
        return None
    if not isinstance(error, Mapping):
        return None
    for info in error.get("@Message.ExtendedInfo") or ():
        if isinstance(info, Mapping) and info.get("Message"):
            return str(info["Message"])
    return str(error["message"]) if error.get("message") else None


class RedfishReader:
    """Reads the chassis's power from a Redfish resource (``get`` and ``environ`` are for tests)."""

    resolution_w = RESOLUTION_W

    def __init__(
        self,
        url: str,
        verify_tls: bool = True,
        get: Getter = _get,
        environ: Mapping[str, str] = os.environ,
    ) -> None:
        self.url = url
        self.source = f"Redfish GET {url}"
        self._verify = verify_tls
        self._get = get
        self._environ = environ

    def _request(self) -> urllib.request.Request:
        request = urllib.request.Request(self.url, headers={"Accept": "application/json"})
        user, password = self._environ.get(USER_ENV), self._environ.get(PASSWORD_ENV)
        if user and password:
            token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
            request.add_header("Authorization", f"Basic {token}")
        return request

    def _context(self) -> ssl.SSLContext | None:
        if not self.url.startswith("https:") or self._verify:
            return None
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # chassis.redfish_verify_tls=false: the user's choice
        return context

    def read_w(self) -> float:
        """One reading (W). Raises ``BmcError`` with the reason."""
        try:
            body = self._get(self._request(), TIMEOUT_S, self._context())
        except urllib.error.HTTPError as exc:
            raise BmcError(self._refusal(exc)) from None
        except urllib.error.URLError as exc:
            raise BmcError(f"{self.source} failed: {exc.reason}") from None
        except (TimeoutError, OSError) as exc:
            raise BmcError(f"{self.source} failed: {exc or 'no answer'}") from None
        except ValueError:
            raise BmcError(f"{self.source} answered with no JSON") from None
        try:
            return parse_power(body)
        except BmcError as exc:
            raise BmcError(f"{self.source} {exc}") from None

    def _refusal(self, exc: urllib.error.HTTPError) -> str:
        said = error_message(exc.read().decode("utf-8", errors="replace")) or exc.reason
        line = f"{self.source} answered HTTP {exc.code}: {said}"
        if exc.code in (401, 403) and not (
            self._environ.get(USER_ENV) and self._environ.get(PASSWORD_ENV)
        ):
            line += f" (set {USER_ENV} and {PASSWORD_ENV} to the BMC's credentials)"
        return line
