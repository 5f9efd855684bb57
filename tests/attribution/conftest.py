from tests.measure.conftest import (
    _no_torch_uuids,
    clock,
    gpu_double,
    idle_cache,
    install_nvml,
    make_session,
)

__all__ = ["_no_torch_uuids", "clock", "gpu_double", "idle_cache", "install_nvml", "make_session"]
