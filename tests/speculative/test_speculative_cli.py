"""``python -m llem speculative=ngram`` on the tiny model: result.json's speculative section and
the terminal's line; a method the engine cannot run is one pre-flight line, exit 3."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from llem.testing.cli import output
from llem.testing.forked_cli import run_llem

pytestmark = pytest.mark.slow


def _tiny(model: Path, run_dir: Path) -> list[str]:
    return [
        "model=hf",
        f"model.name_or_path={model}",
        "device=cpu",
        "measurement.energy=none",
        "measurement.warmup=1",
        "decoder.max_new_tokens=16",
        "dataset.n_prompts=3",
        f"hydra.run.dir={run_dir}",
    ]


def test_a_prompt_lookup_run_writes_its_section_and_prints_its_acceptance(tiny_model_dir, tmp_path):
    run_dir = tmp_path / "run"
    proc = run_llem(*_tiny(tiny_model_dir, run_dir), "speculative=ngram", cwd=tmp_path)
    assert proc.returncode == 0, output(proc)
    result = json.loads((run_dir / "result.json").read_text())
    s = result["speculative"]
    assert s["method"] == "ngram" and s["num_tokens"] == 5
    assert s["requests"] == result["workload"]["requests"] == 3
    # every output token is the target's own or an accepted proposal, one of its own per step
    assert s["tokens_generated"] == result["workload"]["output_tokens"]
    assert s["tokens_generated"] == s["draft_tokens_accepted"] + s["target_steps"]
    assert s["draft_tokens_proposed"] == sum(s["request_draft_tokens_proposed"])
    assert "speculative" not in result["null_reasons"]
    line = re.search(
        r"^speculative=ngram: (\d+) of (\d+) draft tokens accepted .*$", proc.stdout, re.M
    )
    assert line, output(proc)
    assert (int(line[1]), int(line[2])) == (s["draft_tokens_accepted"], s["draft_tokens_proposed"])


def test_a_method_the_engine_cannot_run_is_one_preflight_line(tmp_path):
    proc = run_llem(
        "+backend=server",
        "server.url=http://127.0.0.1:9",
        "speculative=ngram",
        "dry_run=true",
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 3, output(proc)
    assert (
        "speculative=ngram: server.url names a running server, whose speculation llem cannot set "
        "(it can: server.launch=vllm or sglang, or speculative=none)" in proc.stdout + proc.stderr
    )
    assert "Traceback" not in proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("more", "line"),
    [
        (
            ["speculative=ngram", "device=cpu"],
            "speculative=ngram: server.launch=sglang runs NGRAM speculation on CUDA only, and "
            "device=cpu (it can: speculative=draft, or speculative=none)",
        ),
        (
            ["speculative=ngram", "+server.args.speculative_algorithm=EAGLE"],
            "speculative=ngram and server.args.speculative_algorithm both set the server's "
            "speculation (use one: the speculative group, or speculative=none with the arguments)",
        ),
    ],
)
def test_what_a_launched_sglang_cannot_do_is_one_preflight_line(tmp_path, more, line):
    proc = run_llem(
        "+backend=server", "server.launch=sglang", *more, "dry_run=true", cwd=tmp_path, timeout=120
    )
    text = proc.stdout + proc.stderr
    assert proc.returncode == 3, output(proc)
    assert line in text, output(proc)
    assert "Traceback" not in text
