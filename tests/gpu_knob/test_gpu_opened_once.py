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
