"""Printed figures carry their significant digits only: no padding zeros, no exponent form."""

from __future__ import annotations

import pytest

from llem.figures.digits import plain
from llem.result import Energy
from llem.runner.summary import energy_line
from llem.sweep.search_spec import Constraint, SearchSpec
from llem.sweep.search_verdict import judge


@pytest.mark.parametrize(
    "value,text",
    [
        (17.42, "17.4"),
        (0.01234, "0.0123"),
        (11934.2, "11934"),
        (0.5, "0.5"),
        (2.83e-06, "0.00000283"),
    ],
)
def test_plain_keeps_three_significant_digits_without_an_exponent(value: float, text: str) -> None:
    assert plain(value) == text


def test_the_run_summary_gives_j_per_token_to_its_digits() -> None:
    e = Energy(source="nvml_counter", total_j=1742.0, j_per_output_token=17.42)
    assert energy_line(e).startswith("energy: 1742.0 J (nvml_counter), 17.4 J/token")


def test_a_missed_ttft_limit_is_said_in_milliseconds_not_in_exponent_form() -> None:
    limit = Constraint("latency.ttft_ms.p90", "<=", 500.0)
    spec = SearchSpec("energy.j_per_output_token", "minimize", (limit,), 4, 0, "tpe")
    verdict = judge(spec, {"energy.j_per_output_token": 0.1, "latency.ttft_ms.p90": 11934.2})
    assert verdict.why_not == f"{limit.text}: measured 11934"
