from llem.devices.nvidia_reader import REASON_BITS, decode_reasons
from llem.devices.readings import THROTTLE_REASONS
from llem.measure.throttle import (
    POWER_CAP_REASONS,
    SLOWDOWN_REASONS,
    THROTTLING_REASONS,
    is_throttling,
    power_cap_shares,
    sort_reasons,
)


def test_bits_match_nvml_constants():
    import pynvml

    assert REASON_BITS["gpu_idle"] == pynvml.nvmlClocksEventReasonGpuIdle
    assert REASON_BITS["sw_power_cap"] == pynvml.nvmlClocksThrottleReasonSwPowerCap
    assert REASON_BITS["hw_thermal_slowdown"] == pynvml.nvmlClocksEventReasonHwThermalSlowdown
    assert REASON_BITS["hw_power_brake_slowdown"] == 0x80
    assert REASON_BITS["display_clock_setting"] == pynvml.nvmlClocksEventReasonDisplayClockSetting


def test_decode_names_in_bit_order():
    assert decode_reasons(0) == []
    assert decode_reasons(None) == []
    assert decode_reasons(0x1) == ["gpu_idle"]
    assert decode_reasons(0x4 | 0x40) == ["sw_power_cap", "hw_thermal_slowdown"]
    assert decode_reasons(0x1FF) == list(REASON_BITS) == list(THROTTLE_REASONS)
    assert decode_reasons(0x800 | 0x2) == ["applications_clocks_setting", "unknown_0x800"]


def test_only_thermal_and_power_reasons_count_as_throttling():
    assert not is_throttling(["gpu_idle", "applications_clocks_setting", "sync_boost"])
    assert not is_throttling(["display_clock_setting"])
    for name in (
        "sw_power_cap",
        "hw_slowdown",
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
    ):
        assert is_throttling([name])


def test_sort_reasons_dedupes():
    assert sort_reasons(["unknown_0x800", "sw_power_cap", "gpu_idle", "gpu_idle"]) == [
        "gpu_idle",
        "sw_power_cap",
        "unknown_0x800",
    ]


def test_power_cap_is_a_condition_and_slowdowns_invalidate():
    assert {"sw_power_cap"} == POWER_CAP_REASONS
    assert SLOWDOWN_REASONS == THROTTLING_REASONS - POWER_CAP_REASONS
    assert power_cap_shares([]) == (None, {})
    readings = [("sw_power_cap",), ("gpu_idle", "sw_power_cap"), ("gpu_idle",), ("hw_slowdown",)]
    assert power_cap_shares(readings) == (0.5, {"sw_power_cap": 0.5})
