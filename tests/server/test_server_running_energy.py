"""A server started by hand (``server.url``), measured on a machine with a GPU (the NVML double,
its compute processes planted): its processes are the server's, not foreign work; a URL on
another host, or GPUs not named, give null energy with the reason, never another GPU's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from llem.backends.server import backend as server_backend
from llem.backends.server import running
from llem.backends.server.host import HostCheck
from llem.backends.server.processes import ServerProcesses
from llem.devices.nvidia import init_nvml
from llem.measure.engine_gpus import judge_engine_gpus
from llem.result import Figure, GpuRecord, RunResult, ServerSection
from llem.runner.engine_processes import measured_here, write_processes
from llem.testing.clocks import SteppingClock
from llem.testing.fake_pynvml import FakeGpu, FakeNvml
from llem.vocabulary.processes import EngineProcess
from tests.server.fake_openai import LiveMetrics, Plan
from tests.server.fake_thread import fake_in_thread
from tests.server.gpu_here import detached_server, free_port, install_gpus, run_measured

GB = 2**30
STRANGER = 4_194_000  # a pid no process has here: nobody's descendant


@pytest.fixture
def gpus(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    return install_gpus(monkeypatch, tmp_path)


@pytest.mark.slow
def test_a_server_started_by_hand_is_the_runs_own_on_its_gpu(gpus, tiny_model_dir, tmp_path):
    """The server listens on its port from a process llem did not start: found through /proc,
    its process on the GPU is the server's (the run is valid, the process recorded as the
    server's), where before every such run was invalid ('Other processes used a measured GPU')."""
    port = free_port()
    with detached_server(port) as pid:
        gpus(FakeGpu("GPU-a", processes=[(pid, 3 * GB)]))
        result = run_measured(
            tiny_model_dir,
            tmp_path / "run",
            f"server.url=http://127.0.0.1:{port}",
            "server.gpus=[0]",
        )
    assert result["status"] == "ok"
    assert result["validity"]["checks"]["other_processes"] == "passed"
    assert result["validity"]["energy_valid"] is True, result["validity"]["problems"]
    assert result["energy"]["total_j"] > 0
    server = result["server"]
    (process,) = server["processes"]
    assert (process["pid"], process["device"], process["used_memory_mb"]) == (pid, "GPU-a", 3072)
    assert process["name"].startswith("python")  # from /proc/<pid>/comm
    assert server["processes_found_by"].startswith(f"pid {pid} (")
    assert server["processes_found_by"].endswith(f"listening on port {port}")
    assert server["gpus_used"] == ["GPU-a"] and server["on_this_host"] is True
    assert result["validity"]["checks"]["server_gpus"] == "passed"
    assert result["validity"]["checks"]["server_processes"] == "passed"
    (includes,) = result["boundary"]["includes"]
    assert includes.startswith("the whole draw of GPU(s) GPU-a over the window, idle power")
    assert f"{server['processes_found_by']}, with its descendants" in includes


def test_another_process_on_the_servers_gpu_is_foreign_work(gpus, tiny_model_dir, tmp_path):
    """server.pids names the server (here this test's parent, which is not llem's descendant);
    a process outside its tree on the measured GPU still fails the check, named, with whose
    processes were counted as the server's."""
    server = os.getppid()
    gpus(FakeGpu("GPU-a", processes=[(server, 2 * GB), (STRANGER, GB)]))
    with fake_in_thread(Plan()) as url:
        result = run_measured(
            tiny_model_dir,
            tmp_path / "run",
            f"server.url={url}",
            "server.gpus=[0]",
            f"server.pids=[{server}]",
        )
    validity = result["validity"]
    assert validity["checks"]["other_processes"] == "failed" and validity["energy_valid"] is False
    (problem,) = [p for p in validity["problems"] if p.startswith("Other processes")]
    assert f"pid {STRANGER} on GPU-a (1024 MB)" in problem and f"pid {server} on" not in problem
    assert f"counted as the server at {url}'s: pid {server} (" in problem
    assert "named by server.pids, and its descendants" in problem
    assert [p["pid"] for p in result["server"]["processes"]] == [server]
    assert result["energy"]["other_processes"] == [
        {"device": "GPU-a", "pid": STRANGER, "used_memory_mb": 1024.0}
    ]


def test_a_running_server_on_a_gpu_not_named_invalidates_the_energy(gpus, tiny_model_dir, tmp_path):
    """The server (named by server.pids) holds GPU-b too, which server.gpus leaves out: its work
    there is missing from the energy."""
    server = os.getppid()
    gpus(FakeGpu("GPU-a", processes=[(server, GB)]), FakeGpu("GPU-b", processes=[(server, GB)]))
    with fake_in_thread(Plan()) as url:
        result = run_measured(
            tiny_model_dir,
            tmp_path / "run",
            f"server.url={url}",
            "server.gpus=[0]",
            f"server.pids=[{server}]",
        )
    validity = result["validity"]
    assert validity["checks"]["other_processes"] == "passed"
    assert validity["checks"]["server_gpus"] == "failed" and validity["energy_valid"] is False
    assert result["server"]["gpus_used"] == ["GPU-a", "GPU-b"]
    assert (
        "the server runs on GPU(s) GPU-b, which llem did not measure: its work there is missing "
        "from the energy (set server.gpus to cover them)"
    ) in validity["problems"]


def test_a_url_on_another_host_gets_null_energy_with_the_reason(
    gpus, tiny_model_dir, tmp_path, monkeypatch
):
    """The URL's host is planted as another machine's: this host's GPU is not measured (before,
    GPU 0's energy was published over the remote server's tokens)."""
    far = HostCheck(False, "203.0.113.5 is none of this machine's addresses")
    monkeypatch.setattr(server_backend, "url_host", lambda url: far)
    monkeypatch.setattr(running, "url_host", lambda url: far)
    gpus(FakeGpu("GPU-a"))
    with fake_in_thread(Plan()) as url:
        result = run_measured(
            tiny_model_dir, tmp_path / "run", f"server.url={url}", "server.gpus=[0]"
        )
    assert result["status"] == "ok"
    energy, why = result["energy"], result["null_reasons"]
    assert energy["source"] == "unavailable" and energy["total_j"] is None
    assert energy["j_per_output_token"] is None
    assert energy["unavailable_reason"].startswith(f"server.url={url} is not on this host (")
    assert "203.0.113.5" in energy["unavailable_reason"]
    assert result["validity"]["energy_valid"] is None
    assert "is not on this host" in why["validity.energy_valid"]
    assert result["hardware"]["gpus"] == []
    assert result["server"]["on_this_host"] is False
    assert result["boundary"]["includes"] == []
    assert f"the server at {url}: its GPUs were not measured (server.url=" in "".join(
        result["boundary"]["outside"]
    )


def test_a_running_server_whose_gpus_are_not_named_gets_null_energy(gpus, tiny_model_dir, tmp_path):
    """No server.gpus: llem does not take GPU 0 for the server (before, it measured it)."""
    gpus(FakeGpu("GPU-a"), FakeGpu("GPU-b"))
    with fake_in_thread(Plan()) as url:
        result = run_measured(tiny_model_dir, tmp_path / "run", f"server.url={url}")
    assert result["energy"]["total_j"] is None and result["hardware"]["gpus"] == []
    assert "set server.gpus to the GPU indices it runs on" in result["energy"]["unavailable_reason"]
    # measurement.gpu_indices names them just as well
    with fake_in_thread(Plan()) as url:
        named = run_measured(
            tiny_model_dir, tmp_path / "named", f"server.url={url}", "measurement.gpu_indices=[1]"
        )
    assert [g["uuid"] for g in named["hardware"]["gpus"]] == ["GPU-b"]
    assert named["energy"]["total_j"] > 0


def test_another_clients_load_on_the_server_invalidates_the_energy(gpus, tiny_model_dir, tmp_path):
    """The server's /metrics counts two requests finishing for each of llem's: the run says so,
    naming both counts; the same server serving llem alone passes."""
    gpus(FakeGpu("GPU-a"))
    busy = LiveMetrics(generation_per_request=2, other_requests_per_request=2)
    with fake_in_thread(Plan(live=busy)) as url:
        result = run_measured(
            tiny_model_dir, tmp_path / "busy", f"server.url={url}", "server.gpus=[0]"
        )
    validity = result["validity"]
    assert validity["checks"]["server_load"] == "failed" and validity["energy_valid"] is False
    assert result["server"]["requests_finished"] == 12
    (problem,) = [p for p in validity["problems"] if p.startswith("The server counted")]
    assert "12 finished requests (llem sent 4)" in problem and "another client's load" in problem

    alone = LiveMetrics(generation_per_request=2)
    with fake_in_thread(Plan(live=alone)) as url:
        result = run_measured(
            tiny_model_dir, tmp_path / "alone", f"server.url={url}", "server.gpus=[0]"
        )
    assert result["validity"]["checks"]["server_load"] == "passed"
    assert result["validity"]["energy_valid"] is True, result["validity"]["problems"]
    assert result["server"]["requests_finished"] == 4


def test_a_server_without_metrics_leaves_its_load_not_checked(gpus, tiny_model_dir, tmp_path):
    gpus(FakeGpu("GPU-a"))
    with fake_in_thread(Plan()) as url:  # /metrics answers 404
        result = run_measured(
            tiny_model_dir, tmp_path / "run", f"server.url={url}", "server.gpus=[0]"
        )
    assert result["validity"]["checks"]["server_load"] == "not checked"
    assert "404" in result["null_reasons"]["server.requests_finished"]


def test_with_no_root_known_every_process_on_the_measured_gpus_is_the_servers_as_a_condition():
    """The listener could not be read (planted): the processes on the measured GPU are taken as
    the server's, recorded, and the run states it as a condition; another GPU's are not."""
    result = RunResult(status="ok")
    result.server = ServerSection(
        url="http://127.0.0.1:1", launched=False, endpoint="completions", model="m"
    )
    result.hardware.gpus = [GpuRecord(uuid="GPU-a", name="fake")]
    result.set_figure("validity.energy_valid", Figure(True))
    unknown = ServerProcesses((), None, "planted: not readable")
    server = running.RunningServer("http://127.0.0.1:1", HostCheck(True, "loopback"), unknown)
    a = FakeGpu("GPU-a", processes=[(STRANGER, GB)])
    b = FakeGpu("GPU-b", processes=[(STRANGER + 1, GB)])
    opener = lambda: init_nvml(FakeNvml([a, b], SteppingClock()))  # noqa: E731
    facts = running.window_processes(server, opener, measured_here(result))
    judge_engine_gpus(result, "server", write_processes(result, facts))  # as the run does
    assert result.server is not None and result.server.processes == [
        EngineProcess(device="GPU-a", pid=STRANGER, used_memory_mb=1024.0, name=None)
    ]
    validity = result.validity
    assert validity.checks["server_processes"] == "condition" and validity.energy_valid is True
    (said,) = validity.conditions
    assert "(planted: not readable)" in said and f"(pid {STRANGER} on GPU-a)" in said
    assert "server.pids" in said
    assert "planted: not readable" in result.null_reasons["server.gpus_used"]
    assert validity.checks["server_gpus"] == "not checked"
