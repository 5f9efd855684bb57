"""The SIGTERM handler of a run that changed the GPU: restore first, then the previous handler."""

from __future__ import annotations

import os
import signal

from llem.config.gpu import GPUConfig
from llem.runner.gpu_settings import GpuSettings
from llem.testing.fake_pynvml import FakeGpu


def test_sigterm_restores_then_calls_the_handler_that_was_there(install_nvml) -> None:
    gpu = FakeGpu("GPU-aaaa", power_limit_mw=450_000)
    install_nvml([gpu])
    seen = []

    def previous(signum, frame) -> None:
        seen.append((signum, gpu.power_limit_mw))

    old = signal.signal(signal.SIGTERM, previous)
    try:
        settings = GpuSettings(GPUConfig(power_limit_w=300), None)
        settings.apply()
        assert gpu.power_limit_mw == 300_000
        os.kill(os.getpid(), signal.SIGTERM)
        assert seen == [(signal.SIGTERM, 450_000)]  # called after the restore
        assert signal.getsignal(signal.SIGTERM) is previous  # and put back in place
        settings.restore()  # the run's finally: nothing left to do
        assert gpu.control.changes.count(["nvmlDeviceSetPowerManagementLimit", 450_000]) == 1
    finally:
        signal.signal(signal.SIGTERM, old)
