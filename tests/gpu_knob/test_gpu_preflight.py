"""Pre-flight of the gpu section: every problem at once, exit 3, before anything is loaded or
changed."""

from __future__ import annotations

from llem.app.entrypoint import main
from llem.testing.fake_nvml_control import FakeControl
from llem.testing.fake_pynvml import FakeGpu


def _main(tiny_model_dir, tmp_path, *overrides: str) -> int:
    return main(
        [
            "model=hf",
            f"model.name_or_path={tiny_model_dir}",
            *overrides,
            f"hydra.run.dir={tmp_path / 'run'}",
        ]
    )


def _error_lines(err: str) -> list[str]:
    return [line for line in err.strip().splitlines() if line.startswith("error:")]


def test_no_permission_is_exit_3_one_line_saying_how_to_get_it(
    install_nvml, tiny_model_dir, tmp_path, capsys
) -> None:
    gpu = FakeGpu("GPU-aaaa", power_limit_mw=450_000, control=FakeControl(no_permission=True))
    install_nvml([gpu])
    code = _main(tiny_model_dir, tmp_path, "gpu.power_limit_w=300")
    err = capsys.readouterr().err
    assert code == 3, err
    assert _error_lines(err) == [
        "error: 1 pre-flight check failed: changing GPU 0: no permission (NVMLError_NoPermission: "
        "Insufficient Permissions): setting the power limit or clocks needs root or "
        "CAP_SYS_ADMIN, as the vendors' tools (`nvidia-smi -pl`, `amd-smi set`) do: run llem "
        "with sudo (or as root, e.g. a container started with --cap-add SYS_ADMIN)"
    ]
    assert gpu.power_limit_mw == 450_000 and gpu.control.changes == []
    assert not (tmp_path / "run" / "result.json").exists()


def test_out_of_range_values_name_the_range_all_at_once(
    install_nvml, tiny_model_dir, tmp_path, capsys
) -> None:
    gpu = FakeGpu("GPU-aaaa", power_limit_mw=450_000, control=FakeControl(no_permission=True))
    install_nvml([gpu])
    code = _main(tiny_model_dir, tmp_path, "gpu.power_limit_w=800", "gpu.memory_clock_mhz=1000")
    err = capsys.readouterr().err
    assert code == 3, err
    lines = err.strip().splitlines()
    assert lines[0] == "error: 3 pre-flight checks failed:"
    assert (
        "  - gpu.power_limit_w=800 is outside GPU 0's power limit range (allowed: 200 to 700 W)"
        in lines
    )
    assert (
        "  - gpu.memory_clock_mhz=1000 is outside GPU 0's supported clocks (allowed: 2619 to "
        "2619 MHz; supported: 2619)" in lines
    )
    assert any(line.startswith("  - changing GPU 0: no permission") for line in lines)
    assert gpu.power_limit_mw == 450_000


def test_a_dry_run_checks_the_gpu_section_too(install_nvml, tiny_model_dir, tmp_path, capsys):
    gpu = FakeGpu("GPU-aaaa", power_limit_mw=450_000)
    install_nvml([gpu])
    assert _main(tiny_model_dir, tmp_path, "dry_run=true", "gpu.power_limit_w=300") == 0
    assert _main(tiny_model_dir, tmp_path, "dry_run=true", "gpu.power_limit_w=100") == 3
    assert "(allowed: 200 to 700 W)" in capsys.readouterr().err
    assert gpu.power_limit_mw == 450_000  # the permission probe set it to itself, nothing else


def test_no_gpu_is_a_preflight_failure_naming_the_key(tiny_model_dir, tmp_path, capsys) -> None:
    # no test double: this machine's NVML (none on a CPU machine; a GPU machine skips the check)
    import pytest

    from llem.devices.nvidia import NvmlUnavailable, init_nvml

    try:
        init_nvml().shutdown()
        pytest.skip("NVML works here")
    except NvmlUnavailable:
        pass
    code = _main(tiny_model_dir, tmp_path, "gpu.power_limit_w=300")
    err = capsys.readouterr().err
    assert code == 3, err
    (line,) = _error_lines(err)
    assert line.startswith(
        "error: 1 pre-flight check failed: gpu.power_limit_w=300.0 needs a GPU that NVML or "
        "amdsmi can reach"
    )
