"""The command ``server.launch`` starts: a preset (``launch.vllm_command``,
``launch.llamacpp_command``) filled from the point's own keys: the model, its dtype (vLLM),
``server.max_num_seqs`` and the passthrough ``server.args``."""

from __future__ import annotations

import os
import sys

from llem.backends.server.launch import LaunchSpec, llamacpp_command, vllm_command
from llem.backends.types import BackendSections
from llem.config.server import Launch, ServerConfig
from llem.errors import RunError


def launch_spec(sections: BackendSections[ServerConfig], port: int) -> LaunchSpec:
    """The command for ``server.launch`` on ``port`` (this interpreter's Python)."""
    c, m = sections.engine, sections.model
    if c.launch == Launch.vllm:
        return vllm_command(
            m.name_or_path,
            port,
            dtype=m.dtype.value if m.dtype is not None else None,
            max_num_seqs=c.max_num_seqs,
            passthrough=dict(c.args),
            python=sys.executable,
        )
    if c.launch == Launch.llamacpp:
        path = os.path.join(m.name_or_path, m.gguf_file) if m.gguf_file else m.name_or_path
        try:
            return llamacpp_command(path, port, n_parallel=c.max_num_seqs, passthrough=dict(c.args))
        except ValueError as exc:
            raise RunError(f"server.launch=llamacpp server.max_num_seqs: {exc}") from exc
    raise RunError(f"server.launch={c.launch}: no preset (allowed: vllm, llamacpp)")
