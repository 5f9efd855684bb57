from tests.measure.conftest import _no_torch_uuids, clock, idle_cache, install_nvml, make_session

__all__ = ["_no_torch_uuids", "clock", "idle_cache", "install_nvml", "make_session"]
