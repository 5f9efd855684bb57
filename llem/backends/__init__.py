"""Backends: the registry, default detection, and the protocol every backend follows."""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llem.backends.base import Backend

# name -> (module, the package that must be importable for it to work)
_REGISTRY: dict[str, tuple[str, str]] = {
    "pytorch": ("llem.backends.pytorch", "transformers"),
    "vllm": ("llem.backends.vllm", "vllm"),
}

# package -> how to install it, for pre-flight messages
INSTALL_HINTS: dict[str, str] = {
    "vllm": "pip install 'llem[vllm]' on a GPU machine, or "
    "LLEM_VENV=.venv-vllm bash scripts/setup.sh --vllm on any machine",
}


def known_backends() -> list[str]:
    return sorted(_REGISTRY)


def backend_package(name: str) -> str:
    return _REGISTRY[name][1]


def detect_default_backend() -> str | None:
    """The backend used when none is named: the first whose package is importable."""
    for name, (_, package) in _REGISTRY.items():
        if importlib.util.find_spec(package) is not None:
            return name
    return None


def get_backend(name: str) -> Backend:
    module_name, _ = _REGISTRY[name]
    module = importlib.import_module(module_name)
    backend: Backend = module.create_backend()
    return backend
