"""A run opens its GPU library once and hands it to every part that asks (environment,
pre-flight, GPU settings, the measurement session), closing it on every way out."""

from __future__ import annotations

import pytest

from llem.runner import Runner
from llem.testing.cli import compose_tiny
from llem.testing.fake_pynvml import FakeGpu

SMALL = ("device=auto", "dataset.n_prompts=2", "decoder.max_new_tokens=4")


@pytest.mark.slow
def test_a_run_initialises_nvml_once_and_shuts_it_down_once(
    install_nvml, tiny_model_dir, tmp_path
) -> None:
    fake = install_nvml([FakeGpu("GPU-aaaa", power_limit_mw=450_000)])
    run = compose_tiny(tiny_model_dir, *SMALL, "gpu.power_limit_w=300")
    result = Runner().run(run, tmp_path / "run")
    assert result.status == "ok"
    assert result.gpu.devices["GPU-aaaa"]["restored"] == "power limit 450 W"
    assert (fake.init_calls, fake.shutdown_calls) == (1, 1)


@pytest.mark.slow
def test_a_failed_run_still_shuts_it_down(
    install_nvml, tiny_model_dir, tmp_path, monkeypatch
) -> None:
    from llem.runner import runner as runner_module

    fake = install_nvml([FakeGpu("GPU-aaaa", power_limit_mw=450_000)])

    def fail(*args, **kwargs):
        raise RuntimeError("the engine fell over")

    monkeypatch.setattr(runner_module.Runner, "_generate", fail)
    run = compose_tiny(tiny_model_dir, *SMALL, "gpu.power_limit_w=300")
    with pytest.raises(RuntimeError, match="fell over"):
        Runner().run(run, tmp_path / "run")
    assert (fake.init_calls, fake.shutdown_calls) == (1, 1)


@pytest.mark.slow
def test_a_served_run_on_named_gpus_opens_it_once(
    install_nvml, tiny_model_dir, tmp_path, monkeypatch
) -> None:
    """A server llem launches on the GPU server.gpus names: after the window the server's
    processes are looked up on the GPUs through the run's library, not one of the engine's own
    (before: two inits, the second the server engine's)."""
    import sys

    from llem.measure import devices as measure_devices
    from llem.measure.sampler import RealClock
    from llem.runner import preflight as runner_preflight
    from llem.testing.cli import REPO
    from tests.server.test_server_gpus_energy import RUN

    monkeypatch.setenv("LLEM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(measure_devices, "torch_device_uuids", lambda indices: None)
    monkeypatch.setattr(runner_preflight, "cuda_available", lambda: False)
    fake = install_nvml([FakeGpu("GPU-a"), FakeGpu("GPU-b")], clock=RealClock())
    command = f"env PYTHONPATH={REPO} {sys.executable} -m tests.server.fake_openai_cli {{port}}"
    run = compose_tiny(
        tiny_model_dir,
        *RUN,  # a measured server run, device=auto (no CUDA here: the CPU)
        "server.launch=command",
        f"server.command='{command}'",
        "server.model=fake-model",
        "server.gpus=[1]",
    )
    result = Runner().run(run, tmp_path / "run")
    assert result.status == "ok", result.error
    assert [g.uuid for g in result.hardware.gpus] == ["GPU-b"]
    assert result.server is not None and result.server.gpus_used == []  # looked up: none held
    assert (fake.init_calls, fake.shutdown_calls) == (1, 1)
