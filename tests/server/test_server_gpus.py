"""A launched server's GPUs, from its process tree, judged against the GPUs llem measured: the
fake NVML lists planted compute processes, and the tree is planted too."""

from __future__ import annotations

from llem.backends.server import gpus
from llem.devices.nvidia import NvmlUnavailable, init_nvml
from llem.measure.engine_gpus import judge_engine_gpus
from llem.result import Figure, GpuRecord, RunResult, ServerSection
from llem.runner.engine_facts import write_window_facts
from llem.runner.engine_processes import write_processes
from llem.testing.clocks import SteppingClock
from llem.testing.fake_pynvml import FakeGpu, FakeNvml
from llem.vocabulary.facts import EngineProcesses, HeldGpus

SERVER = 4000
TREE = {4000, 4001, 4002}  # the server, its engine core and a worker


def in_tree(pid: int) -> bool:
    return pid in TREE


def no_name(pid: int) -> str | None:
    return None


def opener(*gpu_list: FakeGpu):
    fake = FakeNvml(list(gpu_list), SteppingClock())
    return lambda: init_nvml(fake)


def test_the_gpus_holding_a_process_of_the_servers_tree_are_the_servers() -> None:
    a = FakeGpu("GPU-a", processes=[(4001, 2**30)])
    b = FakeGpu("GPU-b", processes=[(9999, 2**30)])  # someone else's
    c = FakeGpu("GPU-c", processes=[(4002, 2**30), (4001, None)])
    found = gpus.server_gpus(opener(a, b, c), in_tree, name=no_name)
    assert found.uuids == ["GPU-a", "GPU-c"]
    assert [(p.pid, p.device) for p in found.processes or []] == [
        (4001, "GPU-a"),
        (4002, "GPU-c"),
        (4001, "GPU-c"),
    ]


def test_no_gpu_library_or_no_process_listing_is_null_with_the_reason() -> None:
    def missing():
        raise NvmlUnavailable("NVMLError_LibraryNotFound")

    assert gpus.server_gpus(missing, in_tree) == HeldGpus(
        None, "no GPU library: NVMLError_LibraryNotFound"
    )
    unlisted = gpus.server_gpus(opener(FakeGpu("GPU-a", processes=None)), in_tree)
    assert unlisted.uuids is None and "cannot list the compute processes of GPU-a" in str(
        unlisted.null_reason
    )


def _result(measured: list[str]) -> RunResult:
    result = RunResult(status="ok")
    result.server = ServerSection(
        url="http://127.0.0.1:1", launched=True, endpoint="completions", model="m"
    )
    result.hardware.gpus = [GpuRecord(uuid=u, name="fake") for u in measured]
    result.set_figure("validity.energy_valid", Figure(True))
    return result


def launched(held: HeldGpus) -> EngineProcesses:
    """A launched server's processes, as its engine finds them after the window."""
    return EngineProcesses(
        "pid 4000 (vllm), launched by llem", held, gpus.LAUNCHED_COVER, gpus.WHO, launched=True
    )


def test_a_server_gpu_llem_did_not_measure_invalidates_the_energy_and_names_it() -> None:
    result = _result(["GPU-a"])
    judge_engine_gpus(
        result, "server", write_processes(result, launched(HeldGpus(["GPU-a", "GPU-c"])))
    )
    assert result.server is not None and result.server.gpus_used == ["GPU-a", "GPU-c"]
    assert result.validity.energy_valid is False
    assert result.validity.checks["server_gpus"] == "failed"
    (problem,) = result.validity.problems
    assert "GPU-c" in problem and "did not measure" in problem


def test_a_measured_gpu_the_server_does_not_use_is_a_condition_only() -> None:
    result = _result(["GPU-a", "GPU-b"])
    judge_engine_gpus(result, "server", write_processes(result, launched(HeldGpus(["GPU-a"]))))
    assert result.validity.energy_valid is True
    assert result.validity.checks["server_gpus"] == "condition"
    assert "GPU-b" in result.validity.conditions[0]


def test_a_server_commands_unmeasured_gpu_names_server_gpus_as_the_remedy(tmp_path) -> None:
    """server.launch=command has no tensor parallelism of llem's to set: a GPU its tree holds
    that was not measured names server.gpus (a preset's still names its tensor_parallel_size)."""
    import os
    import types

    from llem.backends.server.loaded import ServerModel

    here = os.getpid()  # the planted server's leader: its tree holds a process on GPU-b
    held = FakeGpu("GPU-b", processes=[(here, 2**30)])
    fake = FakeNvml([FakeGpu("GPU-a"), held], SteppingClock())
    said = {}
    for cover in (gpus.RUNNING_COVER, gpus.LAUNCHED_COVER):
        loaded = ServerModel(None, None, "cpu", "auto", {}, "k", 0.0, "u", None, cover=cover)
        loaded.launched = types.SimpleNamespace(pid=here)  # type: ignore[assignment]
        result = _result(["GPU-a"])
        facts = loaded.window_facts(tmp_path, lambda: init_nvml(fake), ["GPU-a"])
        used = write_window_facts(result, facts)
        assert used is not None
        judge_engine_gpus(result, "server", used)  # as the run does after the window
        (said[cover],) = result.validity.problems
    assert said[gpus.RUNNING_COVER].endswith("(set server.gpus to cover them)")
    assert "tensor_parallel_size" in said[gpus.LAUNCHED_COVER]
