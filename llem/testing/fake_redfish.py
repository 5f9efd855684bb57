"""A double of a BMC's Redfish service for tests: a local HTTP server that answers a chassis's
power resources as Redfish does (its documented shapes and error bodies), playing planted answers.

``serve(answers, user=..., password=...)`` runs it on a free port in a thread and yields its base
URL; the chassis is ``/redfish/v1/Chassis/1``, with ``/Power`` (``PowerControl[0].
PowerConsumedWatts``) and ``/EnvironmentMetrics`` (``PowerWatts.Reading``). Each GET of either
takes the next answer (the last one repeats): a number (watts) or ``NO_READING`` (the resource
without a reading, as a BMC whose sensor is absent answers). Given a user and password, a request
without them or with others gets 401 and Redfish's error body; any other path gets 404 and one.
``FakeRedfish.calls`` counts the power GETs; ``FakeRedfish.headers`` keeps the last ones' headers.
"""

from __future__ import annotations

import base64
import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from llem.testing.json_http import local_server, send_json

CHASSIS = "/redfish/v1/Chassis/1"
POWER = f"{CHASSIS}/Power"
ENVIRONMENT = f"{CHASSIS}/EnvironmentMetrics"
NO_READING = "no-reading"


def error_body(code: str, message: str) -> dict[str, Any]:
    """Redfish's error response (DSP0266's ``error`` object with extended information)."""
    return {
        "error": {
            "code": f"Base.1.8.{code}",
            "message": "A general error has occurred. See ExtendedInfo for more information.",
            "@Message.ExtendedInfo": [
                {
                    "@odata.type": "#Message.v1_1_1.Message",
                    "MessageId": f"Base.1.8.{code}",
                    "Message": message,
                    "Severity": "Critical",
                }
            ],
        }
    }


def power_body(answer: float | str) -> dict[str, Any]:
    control: dict[str, Any] = {
        "@odata.id": f"{POWER}#/PowerControl/0",
        "MemberId": "0",
        "Name": "System Power Control",
        "PowerCapacityWatts": 1600,
    }
    if answer != NO_READING:
        control["PowerConsumedWatts"] = answer
    return {
        "@odata.id": POWER,
        "@odata.type": "#Power.v1_7_1.Power",
        "Id": "Power",
        "Name": "Power",
        "PowerControl": [control],
    }


def environment_body(answer: float | str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "@odata.id": ENVIRONMENT,
        "@odata.type": "#EnvironmentMetrics.v1_3_0.EnvironmentMetrics",
        "Id": "EnvironmentMetrics",
        "Name": "Chassis Environment Metrics",
    }
    if answer != NO_READING:
        body["PowerWatts"] = {"DataSourceUri": f"{CHASSIS}/Sensors/TotalPower", "Reading": answer}
    return body


@dataclass
class FakeRedfish:
    answers: list[float | str]
    user: str | None = None
    password: str | None = None
    calls: int = 0
    headers: list[dict[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_answer(self) -> float | str:
        with self.lock:
            answer = self.answers[min(self.calls, len(self.answers) - 1)]
            self.calls += 1
            return answer

    def authorised(self, header: str | None) -> bool:
        if self.user is None:
            return True
        wanted = base64.b64encode(f"{self.user}:{self.password}".encode()).decode("ascii")
        return header == f"Basic {wanted}"


def _handler(fake: FakeRedfish) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            path = self.path.rstrip("/")
            if path in (POWER, ENVIRONMENT):
                fake.headers.append(dict(self.headers.items()))
            if not fake.authorised(self.headers.get("Authorization")):
                message = "While attempting to establish a connection to /redfish/v1, the "
                message += "service was denied access."
                self._send(401, error_body("InsufficientPrivilege", message), auth=True)
            elif path == POWER:
                self._send(200, power_body(fake.next_answer()))
            elif path == ENVIRONMENT:
                self._send(200, environment_body(fake.next_answer()))
            else:
                message = f"The resource at the URI '{self.path}' was not found."
                self._send(404, error_body("ResourceMissingAtURI", message))

        def _send(self, status: int, body: dict[str, Any], auth: bool = False) -> None:
            send_json(
                self, status, body, {"WWW-Authenticate": 'Basic realm="Redfish"'} if auth else None
            )

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@contextmanager
def serve(
    answers: list[float | str], user: str | None = None, password: str | None = None
) -> Iterator[tuple[str, FakeRedfish]]:
    """The double on a free local port: ``(base URL, its state)``; stopped on the way out."""
    fake = FakeRedfish(list(answers), user, password)
    with local_server(_handler(fake)) as url:
        yield url, fake
