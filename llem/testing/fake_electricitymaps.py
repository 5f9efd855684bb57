"""A double of ElectricityMaps' API for tests: a local HTTP server that answers the carbon
intensity of one zone as the API documents it, from a planted intensity per hour.

``serve(hours, key=..., zone=...)`` runs it on a free port in a thread and yields its base URL.
``GET /v3/carbon-intensity/latest?zone=Z`` answers the latest planted hour;
``GET /v3/carbon-intensity/past?zone=Z&datetime=T`` the hour ``T`` names, which must be a planted
hour exactly (the double is strict where the API would floor ``T`` itself: a client that does not
ask for the hour it means gets 404). Each answer has the API's fields: ``zone``,
``carbonIntensity`` (gCO2eq/kWh), ``datetime``, ``updatedAt``, ``createdAt``,
``emissionFactorType``, ``isEstimated``, ``estimationMethod``. A request without the key in the
``auth-token`` header, or with another, gets 401; another zone 404; with ``fail_past`` set, every
``/past`` request gets that status (a service that fails after the window). ``FakeEmaps.requests``
records each request: its path, its query and whether it carried the key.
"""

from __future__ import annotations

import http.server
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from llem.testing.json_http import local_server, send_json

LATEST = "/v3/carbon-intensity/latest"
PAST = "/v3/carbon-intensity/past"


def iso(hour: datetime) -> str:
    """An hour as the API writes it (``2026-11-29T13:00:00.000Z``)."""
    return hour.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


@dataclass(frozen=True)
class ReceivedRequest:
    path: str
    query: dict[str, str]
    with_key: bool  # the auth-token header held the planted key


@dataclass
class FakeEmaps:
    hours: dict[datetime, float]  # UTC hour -> planted intensity (gCO2eq/kWh)
    key: str
    zone: str
    estimated: bool = False
    emission_factor_type: str = "lifecycle"
    fail_past: int | None = None
    requests: list[ReceivedRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, path: str, query: dict[str, str], token: str | None) -> tuple[int, Any]:
        with self.lock:
            self.requests.append(ReceivedRequest(path, query, token == self.key))
        if token != self.key:
            return 401, {"error": "Invalid authentication token"}
        if path not in (LATEST, PAST):
            return 404, {"error": f"Cannot GET {path}"}
        if query.get("zone") != self.zone:
            return 404, {"error": f"Zone '{query.get('zone')}' does not exist."}
        if path == LATEST:
            return 200, self.body(max(self.hours))
        if self.fail_past is not None:
            return self.fail_past, {"error": "Service temporarily unavailable"}
        try:
            asked = datetime.fromisoformat(query.get("datetime", "").replace("Z", "+00:00"))
        except ValueError:
            return 400, {"error": f"Invalid datetime '{query.get('datetime')}'"}
        hour = asked if asked.tzinfo else asked.replace(tzinfo=timezone.utc)
        if hour not in self.hours:
            return 404, {"error": f"No data for zone '{self.zone}' at {query.get('datetime')}"}
        return 200, self.body(hour)

    def body(self, hour: datetime) -> dict[str, Any]:
        return {
            "zone": self.zone,
            "carbonIntensity": self.hours[hour],
            "datetime": iso(hour),
            "updatedAt": iso(hour),
            "createdAt": iso(hour),
            "emissionFactorType": self.emission_factor_type,
            "isEstimated": self.estimated,
            "estimationMethod": "TIME_SLICER_AVERAGE" if self.estimated else None,
        }

    def past_hours(self) -> list[str]:
        """The ``datetime`` of each ``/past`` request, in order."""
        return [r.query.get("datetime", "") for r in self.requests if r.path == PAST]


def _handler(fake: FakeEmaps) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            split = urllib.parse.urlsplit(self.path)
            query = dict(urllib.parse.parse_qsl(split.query))
            status, body = fake.answer(split.path, query, self.headers.get("auth-token"))
            send_json(self, status, body)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@contextmanager
def serve(
    hours: dict[datetime, float],
    key: str,
    zone: str = "DE",
    estimated: bool = False,
    fail_past: int | None = None,
) -> Iterator[tuple[str, FakeEmaps]]:
    """The double on a free local port: ``(base URL, its state)``; stopped on the way out."""
    fake = FakeEmaps(dict(hours), key, zone, estimated, fail_past=fail_past)
    with local_server(_handler(fake)) as url:
        yield url, fake
