"""bitsandbytes' 8-bit matmul warning is said once per process, not once per call (on the CPU it
came once per matmul: 143,493 lines in one study, inside the measured window)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from llem.backends import sections
from llem.backends.pytorch.kwargs import build_quantization_config
from llem.backends.pytorch.quiet import BNB_MATMUL_LOGGER
from llem.config.validate import to_experiment
from llem.testing.cli import compose_tiny

MESSAGE = "MatMul8bitLt: inputs will be cast from %s to float16 during quantization"


def test_an_8bit_load_lets_the_matmul_warning_through_once(
    tiny_model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    logger = logging.getLogger(BNB_MATMUL_LOGGER)  # the logger bitsandbytes says it through
    # an 8-bit run earlier in this process (another test, same pytest worker) has said it already
    for f in list(logger.filters):
        logger.removeFilter(f)
    exp = to_experiment(compose_tiny(tiny_model_dir, "quantization=bnb-8bit"))
    build_quantization_config(sections(exp, "pytorch"))
    with caplog.at_level(logging.WARNING, logger=BNB_MATMUL_LOGGER):
        for _ in range(100):
            logger.warning(MESSAGE, "torch.float32")
    said = [r for r in caplog.records if r.name == BNB_MATMUL_LOGGER]
    assert len(said) == 1 and "torch.float32" in said[0].getMessage()
