"""bitsandbytes on the CPU (0.50 runs 4-bit and 8-bit there): real runs of the tiny model, with
parameters counted as before quantization. bitsandbytes is part of the test extra, so these run
in CI rather than skipping."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from llem.testing.cli import run_tiny
from llem.testing.tinymodel import HEAD64, build_tiny_model

TINY_DECODER = ("decoder.max_new_tokens=3", "decoder.min_new_tokens=3")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny tokenizer with a hidden size of 128: bitsandbytes' CPU 4-bit kernels quantize in
    blocks of 64 along the hidden size, which the usual tiny model's 32 does not fill."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-llama-128"), **HEAD64)


@pytest.fixture(scope="module")
def unquantized(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _run(model_dir, tmp_path_factory.mktemp("none"))


def _run(tiny_model_dir: Path, run_dir: Path, *overrides: str) -> dict[str, Any]:
    return run_tiny(
        tiny_model_dir,
        run_dir,
        *TINY_DECODER,
        "dataset.n_prompts=2",
        "pytorch.batch_size=2",
        *overrides,
    )


@pytest.mark.slow
def test_bitsandbytes_is_installed_for_the_tests() -> None:
    """A quantization test that skips where bitsandbytes is missing is not a test: CI installs
    it (the test extra includes the quantization extra)."""
    import bitsandbytes

    major, minor = (int(x) for x in bitsandbytes.__version__.split(".")[:2])
    assert (major, minor) >= (0, 50)


@pytest.mark.parametrize(
    ("quantization", "label"), [("bnb-4bit", "bnb-4bit-nf4"), ("bnb-8bit", "bnb-8bit")]
)
@pytest.mark.slow
def test_a_quantized_tiny_model_runs_on_the_cpu(
    model_dir: Path, unquantized: dict[str, Any], tmp_path: Path, quantization: str, label: str
) -> None:
    plain = unquantized
    result = _run(model_dir, tmp_path / quantization, f"quantization={quantization}")
    assert result["status"] == "ok" and result["device"] == "cpu"
    assert result["quantization"] == label
    assert result["workload"]["output_tokens"] == 2 * 3
    assert "slow" in " ".join(result["lifecycle"]["preflight_warnings"])
    # parameters (and so FLOPs) as before quantization
    assert result["compute"]["parameters"] == plain["compute"]["parameters"]
    assert result["compute"]["flops_estimate"] == plain["compute"]["flops_estimate"]
