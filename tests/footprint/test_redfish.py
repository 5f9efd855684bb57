"""The chassis layer through a BMC's Redfish service: both resource shapes, the service's own
refusals as one line, the credentials sent and never written, and the window's energy the
planted integral within its bound (a local double that answers as Redfish does, kept with the
other doubles in llem/testing)."""

from __future__ import annotations

import json

import pytest

from llem.config.footprint import ChassisConfig, ChassisSource, footprint_problems
from llem.devices.bmc import BmcError, no_bmc_reason
from llem.devices.redfish import PASSWORD_ENV, USER_ENV, RedfishReader, parse_power
from llem.measure.chassis import ChassisMeter
from llem.testing import fake_redfish
from llem.testing.clocks import SteppingClock

CREDS = {USER_ENV: "root", PASSWORD_ENV: "planted-secret-7f3a"}


@pytest.mark.parametrize("path", [fake_redfish.POWER, fake_redfish.ENVIRONMENT])
def test_both_resource_shapes_give_the_planted_watts(path):
    with fake_redfish.serve([412.5]) as (url, fake):
        assert RedfishReader(url + path, environ={}).read_w() == 412.5
    assert fake.calls == 1


def test_a_power_resource_takes_the_first_member_with_a_reading():
    # a member without one (a sensor that is absent), the chassis's, then a sub-domain's
    members = [{"MemberId": "0"}, {"PowerConsumedWatts": 590}, {"PowerConsumedWatts": 75}]
    body = {"PowerControl": members}
    assert parse_power(body) == 590.0
    with pytest.raises(BmcError, match="without a power reading"):
        parse_power({"PowerControl": [{"PowerConsumedWatts": None}], "PowerWatts": {}})


def test_the_credentials_go_in_basic_authentication_from_the_environment():
    with fake_redfish.serve([300.0], **_creds()) as (url, fake):
        assert RedfishReader(url + fake_redfish.POWER, environ=CREDS).read_w() == 300.0
    assert fake.headers[-1]["Authorization"].startswith("Basic ")


@pytest.mark.parametrize(
    ("environ", "path", "said"),
    [
        (
            {},
            fake_redfish.POWER,
            "answered HTTP 401: While attempting to establish a connection to /redfish/v1, the "
            "service was denied access. (set REDFISH_USERNAME and REDFISH_PASSWORD to the BMC's "
            "credentials)",
        ),
        (
            {**CREDS, PASSWORD_ENV: "wrong"},
            fake_redfish.POWER,
            "answered HTTP 401: While attempting to establish a connection to /redfish/v1, the "
            "service was denied access.",
        ),
        (
            CREDS,
            "/redfish/v1/Chassis/9/Power",
            "answered HTTP 404: The resource at the URI '/redfish/v1/Chassis/9/Power' was not "
            "found.",
        ),
    ],
    ids=["no credentials", "wrong password", "no such chassis"],
)
def test_each_refusal_is_one_line_with_the_services_words(environ, path, said):
    with fake_redfish.serve([300.0], **_creds()) as (url, _), pytest.raises(BmcError) as caught:
        RedfishReader(url + path, environ=environ).read_w()
    line = str(caught.value)
    assert line == f"Redfish GET {url}{path} {said}"
    assert "\n" not in line and "planted-secret" not in line


def test_a_resource_without_a_reading_and_a_host_without_a_bmc_are_said_apart():
    no_reading = pytest.raises(BmcError, match="answered without a power reading")
    with fake_redfish.serve([fake_redfish.NO_READING]) as (url, _), no_reading:
        RedfishReader(url + fake_redfish.POWER, environ={}).read_w()
    with pytest.raises(BmcError) as caught:  # the double is stopped: nothing listens there
        RedfishReader(url + fake_redfish.POWER, environ={}).read_w()
    assert no_bmc_reason(caught.value).startswith(f"no BMC: Redfish GET {url}")
    assert "Connection refused" in str(caught.value)


def test_the_chassis_energy_over_redfish_is_the_planted_integral_within_its_bound():
    # Planted: 500 W until the fourth reading, then 620 W, read at 0, 1, ..., 4 s and at the
    # end (4 s again). The trapezoid: 500 x 2 + 560 x 1 + 620 x 1 = 2180 J. Its bound: the step,
    # 120 W x 1 s / 2 = 60 J, plus whole watts, 0.5 W x 4 s = 2 J: 62 J. The truth, a step
    # anywhere in the third second, lies in 500 x 2 + [500, 620] + 620 = [2120, 2240] J: within.
    with fake_redfish.serve([500, 500, 500, 620], **_creds()) as (url, fake):
        clock = SteppingClock(start=0.0)
        reader = RedfishReader(url + fake_redfish.ENVIRONMENT, environ=CREDS)
        meter = ChassisMeter(reader, clock, interval_s=1.0)
        meter.begin(clock.now())
        clock.sleep(4.0)
        wall = meter.end(clock.now())
    assert fake.calls == 6
    assert wall.null_reason is None
    assert wall.energy_j == pytest.approx(2180.0)
    assert wall.components == pytest.approx({"trapezoid_j": 60.0, "resolution_j": 2.0})
    for truth in (2120.0, 2240.0):
        assert abs(wall.energy_j - truth) <= wall.uncertainty_j
    assert wall.source == f"Redfish GET {url}{fake_redfish.ENVIRONMENT}"


@pytest.mark.parametrize(
    ("fields", "line"),
    [
        ({"source": ChassisSource.redfish}, "chassis.source=redfish needs chassis.redfish_url"),
        (
            {"source": ChassisSource.redfish, "redfish_url": "https://root:pw@bmc/redfish/v1"},
            "chassis.redfish_url holds credentials (user:password@host): give them in "
            "REDFISH_USERNAME and REDFISH_PASSWORD instead, never in the config",
        ),
        (
            {"source": ChassisSource.auto, "redfish_url": "https://bmc/redfish/v1"},
            "chassis.redfish_url=https://bmc/redfish/v1 applies to chassis.source=redfish only "
            "(it is chassis.source=auto)",
        ),
        (
            {"source": ChassisSource.redfish, "redfish_url": "bmc/redfish/v1"},
            "chassis.redfish_url=bmc/redfish/v1 is not an http:// or https:// URL",
        ),
    ],
)
def test_redfish_keys_are_checked_with_one_line_each(fields, line):
    from llem.config.footprint import CarbonConfig

    (problem,) = footprint_problems(CarbonConfig(), ChassisConfig(**fields))
    assert problem.startswith(line)


def test_preflight_refuses_a_redfish_service_that_gives_no_reading():
    from llem.config.schema import ExperimentConfig
    from llem.runner.footprint import footprint_preflight

    exp = ExperimentConfig()
    exp.chassis.source = ChassisSource.redfish
    with fake_redfish.serve([300.0], **_creds()) as (url, _):
        exp.chassis.redfish_url = url + fake_redfish.POWER
        reader = RedfishReader(exp.chassis.redfish_url, environ={})
        (line,) = footprint_preflight(exp, reader)
        assert footprint_preflight(exp, RedfishReader(exp.chassis.redfish_url, environ=CREDS)) == []
    assert line.startswith(f"chassis.source=redfish but Redfish GET {url}")
    assert line.endswith(
        "(check chassis.redfish_url and the credentials, or use chassis.source=none)"
    )
    assert json.dumps(line).count("\\n") == 0


def _creds() -> dict[str, str]:
    return {"user": CREDS[USER_ENV], "password": CREDS[PASSWORD_ENV]}
