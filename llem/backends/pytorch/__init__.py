"""The PyTorch backend: transformers ``from_pretrained`` + ``generate``, configured by the
``pytorch:`` section (``llem.config.pytorch``).

``kwargs`` builds what transformers receives, ``compile`` handles torch.compile, ``backend`` is
the driver; ``pytorch.batching=continuous`` serves through ``continuous`` on the manager
``cb_manager`` starts, whose steps ``cb_steps`` records.
"""

from __future__ import annotations

from llem.backends.batching import StepClock, count_output_tokens, left_pad
from llem.backends.pytorch.backend import PyTorchBackend
from llem.backends.pytorch.kwargs import Sections, build_generate_kwargs, build_load_kwargs
from llem.config.pytorch import PyTorchConfig
from llem.vocabulary.engine import Backend

__all__ = [
    "PyTorchBackend",
    "StepClock",
    "build_generate_kwargs",
    "build_load_kwargs",
    "count_output_tokens",
    "create_backend",
    "left_pad",
]


def create_backend(sections: Sections) -> Backend[PyTorchConfig]:
    return PyTorchBackend(sections)
