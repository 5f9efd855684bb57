"""Where vLLM's offline engine core runs, as llem reads vLLM's own switch, and what the step
clock then says (no engine started: the switch is read as vLLM reads it, an integer)."""

from __future__ import annotations

import pytest

from llem.backends.vllm.core_process import CORE_IN_PROCESS, CORE_OWN_PROCESS, core_in_process
from llem.backends.vllm.steps import offline_clock

SWITCH = "VLLM_ENABLE_V1_MULTIPROCESSING"


@pytest.mark.parametrize(
    ("environ", "here"),
    [
        ({}, False),
        ({SWITCH: "1"}, False),
        ({SWITCH: "0"}, True),
        ({SWITCH: " 0 "}, True),
        ({SWITCH: "no"}, False),
    ],
)
def test_the_core_is_in_process_only_where_vllms_switch_is_0(
    environ: dict[str, str], here: bool
) -> None:
    assert core_in_process(environ) is here
    clock = offline_clock(environ)
    assert (CORE_IN_PROCESS in clock) is here and (CORE_OWN_PROCESS in clock) is not here
