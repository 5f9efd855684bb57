"""Library warnings said once, not once per call.

bitsandbytes' 8-bit matmul logs "inputs will be cast from torch.float32 to float16" through its
logger on every call with float32 inputs (the CPU path): 143,493 lines in one 9-point study on
the CPU, written while the window was being measured. ``say_once`` lets each distinct message of
a logger through once per process, so the warning is still seen.
"""

from __future__ import annotations

import logging

BNB_MATMUL_LOGGER = "bitsandbytes.autograd._functions"


class _Once(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self.said: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        key = str(record.msg)  # the template: its arguments (a dtype) vary only in wording
        if key in self.said:
            return False
        self.said.add(key)
        return True


def say_once(logger_name: str) -> None:
    """Let each distinct message of ``logger_name`` through once per process (idempotent)."""
    logger = logging.getLogger(logger_name)
    if not any(isinstance(f, _Once) for f in logger.filters):
        logger.addFilter(_Once())
