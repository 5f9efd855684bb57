"""llem: how fast and how energy-efficiently a causal LM generates text.

The Python API (``llem.run``, ``llem.load_results``, ``llem.RunResult``, ``llem.ConfigError``,
``llem.PreflightError``) is imported on first use, so ``import llem`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llem.version import __version__

__all__ = [
    "__version__",
    "ConfigError",
    "LlemError",
    "PreflightError",
    "RunError",
    "RunResult",
    "load_results",
    "run",
]

_LAZY = {
    "run": "llem.api",
    "load_results": "llem.api",
    "RunResult": "llem.result",
    "ConfigError": "llem.errors",
    "PreflightError": "llem.errors",
    "LlemError": "llem.errors",
    "RunError": "llem.errors",
}

if TYPE_CHECKING:
    from llem.api import load_results, run
    from llem.errors import ConfigError, LlemError, PreflightError, RunError
    from llem.result import RunResult


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'llem' has no attribute {name!r}")
