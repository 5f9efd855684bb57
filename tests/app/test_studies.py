"""Studies as files: ./conf on the search path, shipped protocols, the record, bad study files."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import zipfile
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hydra.core.config_search_path import ConfigSearchPath, SearchPathElement

from llem.app.entrypoint import main
from llem.testing import forked_cli

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p.name[:-5] for p in resources.files("llem.conf").joinpath("experiment").iterdir())
#: studies on the vLLM backend: their dry run needs vllm importable to pass pre-flight
VLLM_STUDIES = {"mlenergy", "batch_scaling_vllm", "speculative_crossover"}
#: studies that set traffic/slo keys (issue 18's serving config)
SERVING_STUDIES = {
    "mlenergy",
    "batch_scaling_vllm",
    "serving_rate",
    "energy_under_slo",
    "speculative_crossover",
}
#: studies that search (an objective on energy: on a machine without a GPU, exit 2 saying so)
SEARCH_STUDIES = {"energy_under_slo"}
STACKS = ("transformers", "vllm", "vllm_server", "llamacpp_server")


def _has(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


needs_traffic = pytest.mark.skipif(
    not _has("llem.config.traffic"), reason="the traffic/slo config has not landed in this tree"
)

STUDY = """\
# @package _global_
# A user's own study, written into a fresh directory by the test.
defaults:
  - override /model: hf
model:
  name_or_path: {model}
decoder:
  max_new_tokens: 3
  min_new_tokens: 3
dataset:
  n_prompts: 2
measurement:
  warmup: 0
  min_window_s: 0
hydra:
  sweeper:
    params:
      pytorch.batch_size: 1,2
"""


@pytest.fixture(autouse=True)
def _keep_argv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", list(sys.argv))  # main() rewrites sys.argv


def llem(cwd: Path, *args: str, timeout: int = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return forked_cli.run_command(list(args), env=env, cwd=cwd, timeout=timeout)


def write_study(directory: Path, name: str, text: str) -> Path:
    path = directory / "conf" / "experiment" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


# --------------------------------------------------------------------------- the search path plugin
class SearchPath(ConfigSearchPath):
    """The part of Hydra's search path a search-path plugin uses: read it, append to it."""

    def __init__(self, *entries: tuple[str, str]) -> None:
        self.entries = [SearchPathElement(provider, path) for provider, path in entries]

    def get_path(self) -> list[SearchPathElement]:
        return self.entries

    def append(self, provider: str, path: str, anchor: Any = None) -> None:
        self.entries.append(SearchPathElement(provider, path))

    def prepend(self, provider: str, path: str, anchor: Any = None) -> None:
        self.entries.insert(0, SearchPathElement(provider, path))


def _search_path(main_entry: str) -> list[str]:
    from hydra_plugins.llem_searchpath.llem_searchpath import LlemWorkingDirSearchPath

    sp = SearchPath(("hydra", "pkg://hydra.conf"), ("main", main_entry))
    LlemWorkingDirSearchPath().manipulate_search_path(sp)
    return [e.path for e in sp.get_path()]


def test_hydra_finds_the_search_path_plugin_once() -> None:
    """Hydra registers every plugin class a ``hydra_plugins`` module holds: only the subclass."""
    from hydra.core.plugins import Plugins
    from hydra.plugins.search_path_plugin import SearchPathPlugin

    found = [
        p
        for p in Plugins.instance().discover(SearchPathPlugin)
        if p.__module__.startswith(("llem", "hydra_plugins.llem"))
    ]
    assert [p.__name__ for p in found] == ["LlemWorkingDirSearchPath"]


def test_conf_in_the_working_directory_is_appended_for_llem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "conf").mkdir()
    monkeypatch.chdir(tmp_path)
    expected = f"file://{tmp_path.resolve() / 'conf'}"
    assert _search_path("pkg://llem/conf") == ["pkg://hydra.conf", "pkg://llem/conf", expected]
    assert _search_path("pkg://llem.conf")[-1] == expected


def test_no_conf_directory_adds_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert _search_path("pkg://llem/conf") == ["pkg://hydra.conf", "pkg://llem/conf"]


def test_other_hydra_applications_are_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "conf").mkdir()
    monkeypatch.chdir(tmp_path)
    for other in ("pkg://myapp/conf", "file:///home/me/notllem/conf", "pkg://llem_extras/conf"):
        assert _search_path(other) == ["pkg://hydra.conf", other]


# --------------------------------------------------------------------------- a user's own study
@pytest.mark.slow
def test_own_study_in_a_fresh_directory_dry_run_then_real_run_then_rerun_from_output(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    project = tmp_path / "project"
    study_file = write_study(project, "my_study", STUDY.format(model=tiny_model_dir))
    sweep = tmp_path / "sweep"

    dry = llem(project, "--multirun", "+experiment=my_study", "dry_run=true")
    assert dry.returncode == 0, dry.stderr
    assert "2 points" in dry.stdout and "pytorch.batch_size=2" in dry.stdout
    assert not (project / "outputs").exists()  # a dry run writes nothing

    real = llem(
        project,
        "--multirun",
        "+experiment=my_study",
        f"hydra.sweep.dir={sweep}",
        "~hydra.callbacks.report",
    )
    assert real.returncode == 0, real.stderr
    for index, batch in ((0, 1), (1, 2)):
        result = json.loads((sweep / str(index) / "result.json").read_text())
        assert result["status"] == "ok"
        assert result["workload"]["batch_size"] == batch
        assert result["workload"]["output_tokens"] == 2 * 3  # min = max = 3 new tokens

    # The sweep directory holds the study file as it ran, and what it takes to run it again.
    record = json.loads((sweep / "study.json").read_text())
    assert record["name"] == "my_study"
    assert record["source"] == "conf/experiment/my_study.yaml"
    assert (sweep / record["file"]).read_text() == study_file.read_text()
    assert record["overrides"][0] == "+experiment=my_study"

    # The original is edited afterwards; the recorded copy still runs, from anywhere.
    study_file.unlink()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    rerun = shlex.split(record["rerun"])
    assert rerun[:3] == ["python", "-m", "llem"]
    again = llem(elsewhere, *rerun[3:], "dry_run=true")
    assert again.returncode == 0, again.stderr
    assert "2 points" in again.stdout and "pytorch.batch_size=2" in again.stdout


@pytest.mark.slow
def test_config_dir_still_works(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    studies = tmp_path / "studies"
    write_study(studies, "mine", STUDY.format(model=tiny_model_dir))
    monkeypatch.chdir(tmp_path)  # no ./conf here
    code = main(
        ["--multirun", "--config-dir", str(studies / "conf"), "+experiment=mine", "dry_run=true"]
    )
    assert code == 0, capsys.readouterr().err
    assert "2 points" in capsys.readouterr().out


# --------------------------------------------------------------------------- shipped protocols
def test_every_shipped_preset_is_documented_and_cites_a_source() -> None:
    assert SHIPPED == [
        "aienergyscore",
        "batch_scaling",
        "batch_scaling_vllm",
        "carbon_per_answer",
        "decoding",
        "decoding_quality",
        "energy_under_slo",
        "engines",
        "mlenergy",
        "peer_sweep",
        "phase_energy",
        "quantization",
        "quantization_quality",
        "serving_rate",
        "speculative_crossover",
    ]
    for name in SHIPPED:
        text = resources.files("llem.conf").joinpath("experiment", f"{name}.yaml").read_text()
        assert text.startswith("# @package _global_\n"), name
        assert "Source:" in text and ("Protocol" in text or "Workload" in text), name
        assert f"+experiment={name}" in text, name


def _bnb() -> bool:
    """bitsandbytes (>= 0.50) runs 4-bit and 8-bit on the CPU too: without it, pre-flight fails
    the quantized points; with it, they pass (slowly on a CPU)."""
    import importlib.util

    return importlib.util.find_spec("bitsandbytes") is not None


@pytest.mark.parametrize("name", SHIPPED)
@pytest.mark.slow
def test_shipped_preset_dry_run(
    name: str,
    tmp_path: Path,
    tiny_model_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    if name in SERVING_STUDIES and not _has("llem.config.traffic"):
        pytest.skip("the traffic/slo config has not landed in this tree")
    if name in SEARCH_STUDIES:
        _search_study_dry_run(name, tmp_path, monkeypatch, capsys)
        return
    monkeypatch.chdir(tmp_path)
    extra = [f"model.name_or_path={tiny_model_dir}"] if name == "peer_sweep" else []
    # One repeat per configuration keeps this fast: repeats never change a point's validity.
    extra.append("hydra.sweeper.params.repeat=0")
    code = main(["--multirun", f"+experiment={name}", "dry_run=true", *extra])
    out, err = capsys.readouterr()
    assert not errors(err), err
    assert "skipped #" not in out, out
    assert "dry run: nothing was loaded" in out
    if name == "quantization" and not _bnb():
        # Without bitsandbytes: pre-flight says why, for bnb points only.
        assert code == 3, out
        failed = [line for line in out.splitlines() if "pre-flight FAILED" in line]
        assert len(failed) == 9 and all("quantization=bnb" in line for line in failed)
        assert all("bitsandbytes" in line or "CUDA" in line for line in failed)
    elif name == "engines":
        _engines_dry_run(code, out)
    elif name in VLLM_STUDIES and not _has("vllm"):
        # Without vllm: every point fails pre-flight, saying so; nothing else is wrong.
        assert code == 3, out
        failed = [line for line in out.splitlines() if "pre-flight FAILED" in line]
        assert failed and all("vllm" in line for line in failed), out
        assert "pre-flight ok" not in out
    else:
        assert code == 0, out + err
    assert not (tmp_path / "outputs").exists()


def _engines_dry_run(code: int, out: str) -> None:
    """transformers passes pre-flight anywhere; each other stack passes exactly where its package
    is installed with this interpreter, and fails saying which package otherwise."""
    lines = {s: [x for x in out.splitlines() if f"[stack={s}]" in x] for s in STACKS}
    assert all(len(found) == 1 for found in lines.values()), out
    assert "pre-flight ok" in lines["transformers"][0]
    for stack, package in (
        ("vllm", "vllm"),
        ("vllm_server", "vllm"),
        ("llamacpp_server", "llama_cpp"),
    ):
        if _has(package):
            assert "pre-flight ok" in lines[stack][0], out
        else:
            assert "pre-flight FAILED" in lines[stack][0] and f"'{package}'" in lines[stack][0]
    assert code == (0 if _has("vllm") and _has("llama_cpp") else 3), out


def _search_study_dry_run(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """A search for least energy: where no GPU measures energy it stops with exit 2 naming the
    figures that can be searched; with device=cuda its declaration and space are printed, and
    pre-flight says what this machine lacks (a GPU; vllm where it is not installed)."""
    pytest.importorskip("optuna")
    monkeypatch.chdir(tmp_path)
    code = main(["--multirun", f"+experiment={name}", "dry_run=true"])
    out, err = capsys.readouterr()
    if _has("torch") and not __import__("torch").cuda.is_available():
        assert code == 2 and "needs measured energy" in err, err
    code = main(["--multirun", f"+experiment={name}", "dry_run=true", "device=cuda"])
    out, err = capsys.readouterr()
    assert "search plan: minimize steady_state.j_per_output_token subject to" in out, out + err
    assert "latency.ttft_ms.p90 <= 500; latency.tpot_ms.p90 <= 50; budget 30 trials" in out
    assert "gpu.power_limit_w=interval(200,400)" in out
    assert code in (0, 3) and "dry run: nothing was loaded" in out
    assert not (tmp_path / "outputs").exists()


@pytest.mark.slow
def test_shipped_presets_set_what_their_protocol_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hydra import compose, initialize_config_module

    from llem.config.store import register_configs

    monkeypatch.chdir(tmp_path)
    register_configs()

    def cfg(name: str):
        with initialize_config_module("llem.conf", version_base="1.3"):
            return compose("config", overrides=[f"+experiment={name}"], return_hydra_config=True)

    c = cfg("aienergyscore")
    assert (c.pytorch.batch_size, c.dataset.n_prompts, c.measurement.min_window_s) == (1, 1000, 0)
    assert c.decoder.min_new_tokens == c.decoder.max_new_tokens == 10
    assert c.hydra.sweeper.params == {"repeat": "range(10)"}
    c = cfg("peer_sweep")
    assert (c.dataset.n_prompts, c.dataset.input_tokens, c.device.value) == (8, 32, "cpu")
    assert c.decoder.min_new_tokens == c.decoder.max_new_tokens == 32
    assert c.hydra.sweeper.params == {"pytorch.batch_size": "1,4", "repeat": "range(2)"}
    c = cfg("batch_scaling")
    assert c.sweep.order.value == "interleave"
    assert c.hydra.sweeper.params["pytorch.batch_size"] == "1,2,4,8,16,32,64"
    c = cfg("quantization")
    assert c.hydra.sweeper.params["quantization"] == "none,bnb-8bit,bnb-4bit,bnb-4bit-fp4"
    c = cfg("decoding")
    assert c.hydra.sweeper.params["decoder"] == "greedy,standard,creative,factual"
    c = cfg("speculative_crossover")
    assert (c.backend, c.traffic.kind.value, c.decoder.do_sample) == ("vllm", "offline", False)
    assert c.hydra.sweeper.params == {
        "speculative": "none,ngram",
        "vllm.max_num_seqs": "1,4,16",
        "repeat": "range(3)",
    }
    c = cfg("carbon_per_answer")
    assert (c.dataset.source.value, c.dataset.n_prompts, c.decoder.do_sample) == (
        "arithmetic",
        64,
        False,
    )
    assert (c.carbon.intensity_g_per_kwh, c.carbon.market_based) == (400, False)
    assert "no grid's figure" in c.carbon.label
    assert c.hydra.sweeper.params == {"pytorch.batch_size": "1,4,16", "repeat": "range(3)"}


def test_the_phase_energy_study_runs_each_length_exactly_on_the_same_prompts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every point of the grid generates exactly its decoder.max_new_tokens (min_new_tokens
    follows it), 1 and N > 1, greedy, on the same seeded prompts, repeated for an interval."""
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    from llem.config.store import register_configs

    monkeypatch.chdir(tmp_path)
    register_configs()
    with initialize_config_module("llem.conf", version_base="1.3"):
        study = compose("config", overrides=["+experiment=phase_energy"], return_hydra_config=True)
        params = study.hydra.sweeper.params
        lengths = [int(n) for n in params["decoder.max_new_tokens"].split(",")]
        assert lengths[0] == 1 and len(lengths) == 2 and lengths[1] > 1
        assert params["repeat"] == "range(5)" and study.sweep.order.value == "interleave"
        for n in lengths:
            c = OmegaConf.to_object(
                compose(
                    "config", overrides=["+experiment=phase_energy", f"decoder.max_new_tokens={n}"]
                )
            )
            assert (c.decoder.min_new_tokens, c.decoder.max_new_tokens) == (n, n)
            assert c.decoder.do_sample is False
            assert (c.dataset.source.value, c.dataset.seed, c.dataset.input_tokens) == (
                "synthetic",
                0,
                256,
            )


@needs_traffic
def test_serving_studies_set_what_their_protocol_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hydra import compose, initialize_config_module

    from llem.config.store import register_configs

    monkeypatch.chdir(tmp_path)
    register_configs()

    def cfg(name: str):
        with initialize_config_module("llem.conf", version_base="1.3"):
            return compose("config", overrides=[f"+experiment={name}"], return_hydra_config=True)

    c = cfg("mlenergy")
    assert (c.backend, c.traffic.kind.value) == ("vllm", "offline")
    sizes = [int(b) for b in c.hydra.sweeper.params["vllm.max_num_seqs"].split(",")]
    assert sizes[0] == 8 and sizes[-1] == 512
    # ML.ENERGY's rule needs N >= 2B + 1 requests at every batch size: with margin, each
    # request its own prompt (nothing for a prefix cache to reuse)
    assert all(c.traffic.n_requests >= 1.25 * (2 * b + 1) for b in sizes)
    assert c.dataset.n_prompts >= c.traffic.n_requests
    assert c.decoder.min_new_tokens == c.decoder.max_new_tokens
    c = cfg("batch_scaling_vllm")
    assert (
        c.hydra.sweeper.params["vllm.max_num_seqs"]
        == cfg("batch_scaling").hydra.sweeper.params["pytorch.batch_size"]
    )
    assert c.backend == "vllm" and c.dataset.n_prompts == 64 and c.sweep.order.value == "interleave"
    c = cfg("serving_rate")
    assert (c.traffic.kind.value, c.pytorch.batching.value) == ("poisson", "continuous")
    assert c.hydra.sweeper.params["traffic.rate_per_s"] == "1,2,4,8,16"
    assert c.slo.ttft_ms is not None and c.slo.tpot_ms is not None
    # open loop: every rate sends for the same time, which spans the 20 s steady state with room
    # to spare (each point checked by tests/search/test_study_steady_state.py)
    assert c.traffic.n_requests is None
    assert c.traffic.duration_s >= 1.5 * c.measurement.min_steady_state_s


@pytest.mark.slow
def test_repository_example_study_runs_from_the_repository_root(capsys, monkeypatch) -> None:
    monkeypatch.chdir(REPO)
    code = main(["--multirun", "+experiment=example", "dry_run=true"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "8 points" in out and "every point to run passed pre-flight" in out


def test_the_example_study_sends_each_batch_size_enough_requests_to_fill_it() -> None:
    """llem warns at a point whose requests are fewer than 2 x its batch (the batch fills and
    drains within the window): the shipped example must not warn at every batch-4 point."""
    import yaml

    study = yaml.safe_load((REPO / "conf" / "experiment" / "example.yaml").read_text())
    sizes = [
        int(b) for b in str(study["hydra"]["sweeper"]["params"]["pytorch.batch_size"]).split(",")
    ]
    assert study["dataset"]["n_prompts"] >= 2 * max(sizes)


# --------------------------------------------------------------------------- bad input
@pytest.mark.slow
def test_unknown_experiment_lists_shipped_and_local_ones_in_one_line(tmp_path: Path) -> None:
    write_study(tmp_path, "mine", "# @package _global_\n")
    proc = llem(tmp_path, "--multirun", "+experiment=nope")
    assert proc.returncode == 2, proc.stderr
    assert errors(proc.stderr) == proc.stderr.strip().splitlines(), proc.stderr
    (line,) = errors(proc.stderr)
    assert "no experiment 'nope'" in line
    assert (
        "aienergyscore, batch_scaling, batch_scaling_vllm, carbon_per_answer, decoding, "
        "decoding_quality, "
        "energy_under_slo, engines, mlenergy, peer_sweep, phase_energy, quantization, "
        "quantization_quality, serving_rate, speculative_crossover (shipped with llem)" in line
    )
    assert "mine (./conf/experiment)" in line
    assert not (tmp_path / "outputs").exists()


BAD_STUDIES = [
    (
        "decoder:\n  temprature: 0.7\n",
        ["conf/experiment/bad.yaml", "decoder.temprature: no such key", "temperature"],
    ),
    (
        "pytorch:\n  batch_size: four\n",
        ["conf/experiment/bad.yaml", "pytorch.batch_size", "four"],
    ),
    (
        "hydra:\n  sweeper:\n    params:\n      pytorch.batch_size: 1,four\n",
        ["conf/experiment/bad.yaml", "pytorch.batch_size=four", "Integer"],
    ),
    (
        "hydra:\n  sweeper:\n    params:\n      decoder.temprature: 0.1,0.2\n",
        ["conf/experiment/bad.yaml", "decoder.temprature: no such key", "temperature"],
    ),
    (
        "hydra:\n  sweeper:\n    params:\n      decoder: greedy,sloppy\n",
        ["conf/experiment/bad.yaml", "'sloppy'", "greedy"],
    ),
]


@pytest.mark.parametrize("body,words", BAD_STUDIES)
@pytest.mark.slow
def test_bad_study_file_is_rejected_before_anything_loads_naming_file_and_key(
    body: str,
    words: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    write_study(tmp_path, "bad", "# @package _global_\n" + body)
    monkeypatch.chdir(tmp_path)
    code = main(["--multirun", "+experiment=bad"])
    err = capsys.readouterr().err
    assert code == 2, err
    (line,) = errors(err)
    for word in words:
        assert word in line, line
    assert not (tmp_path / "outputs").exists()


@pytest.mark.slow
def test_a_required_value_left_unset_stops_the_study(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.chdir(tmp_path)
    code = main(["--multirun", "+experiment=peer_sweep", "dry_run=true"])
    err = capsys.readouterr().err
    assert code == 2
    assert errors(err) == ["error: model.name_or_path is required but has no value"]
    assert "model.name_or_path=..." in err


@pytest.mark.slow
def test_a_local_file_shadowed_by_a_shipped_one_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    write_study(tmp_path, "decoding", "# @package _global_\n")
    monkeypatch.chdir(tmp_path)
    assert main(["--multirun", "+experiment=decoding", "dry_run=true"]) == 0
    out = capsys.readouterr().out
    assert "conf/experiment/decoding.yaml has the same name and is ignored" in out


# --------------------------------------------------------------------------- packaging
@pytest.mark.slow
def test_installed_wheel_finds_conf_and_ships_the_presets(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
        + ["-w", str(tmp_path / "dist"), str(REPO)],
        check=True,
        capture_output=True,
    )
    (wheel,) = (tmp_path / "dist").glob("llem-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "hydra_plugins/llem_searchpath/llem_searchpath.py" in names
    assert {f"llem/conf/experiment/{n}.yaml" for n in SHIPPED} <= set(names)
    target = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(target)  # what pip installs, without touching this venv
    project = tmp_path / "project"
    write_study(
        project,
        "mine",
        "# @package _global_\nhydra:\n  sweeper:\n    params:\n      repeat: range(2)\n",
    )
    code = (
        "import hydra_plugins.llem_searchpath.llem_searchpath as p, llem, sys;"
        f"assert p.__file__.startswith({str(target)!r}), p.__file__;"
        f"assert llem.__file__.startswith({str(target)!r}), llem.__file__;"
        "from llem.app.entrypoint import main;"
        "sys.exit(main(['--multirun', '+experiment=mine', 'dry_run=true']))"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=project, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert "2 points" in proc.stdout


def test_rerun_has_an_absolute_config_dir_for_a_relative_sweep_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llem.hydra.compose.studies import _rerun_command

    monkeypatch.chdir(tmp_path)
    rerun = shlex.split(_rerun_command(Path("outputs/multirun/x"), "mine", ["+experiment=mine"]))
    config_dir = Path(rerun[rerun.index("--config-dir") + 1])
    assert config_dir.is_absolute()
    assert config_dir.parent == tmp_path / "outputs" / "multirun" / "x"
