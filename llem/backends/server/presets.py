"""The command ``server.launch`` starts: a preset (``launch.vllm_command``,
``launch.llamacpp_command``, ``launch.sglang_command``, ``launch.tgi_command``) filled from the
point's own keys: the model, its dtype (vLLM, SGLang, TGI), ``server.max_num_seqs`` and the
passthrough ``server.args``.

The SGLang and TGI presets are chosen by name (``sglang``, ``tgi``): ``server.launch`` offers
them once ``llem.config.server.Launch`` lists them.
"""

from __future__ import annotations

import os
import sys

from llem.backends.server.launch import (
    LaunchSpec,
    llamacpp_command,
    sglang_command,
    tgi_command,
    vllm_command,
)
from llem.backends.types import BackendSections
from llem.config.server import ServerConfig
from llem.errors import RunError

#: the point's key each preset parameter comes from (named in a refusal)
PARAMETER_KEYS = {
    "n_parallel": "server.max_num_seqs",
    "max_batch_size": "server.max_num_seqs",
    "dtype": "model.dtype",
}


def launch_spec(sections: BackendSections[ServerConfig], port: int) -> LaunchSpec:
    """The command for ``server.launch`` on ``port`` (this interpreter's Python)."""
    c, m = sections.engine, sections.model
    name = c.launch.value if c.launch is not None else None
    dtype = m.dtype.value if m.dtype is not None else None
    try:
        if name == "vllm":
            return vllm_command(
                m.name_or_path,
                port,
                dtype=dtype,
                max_num_seqs=c.max_num_seqs,
                passthrough=dict(c.args),
                python=sys.executable,
            )
        if name == "llamacpp":
            path = os.path.join(m.name_or_path, m.gguf_file) if m.gguf_file else m.name_or_path
            return llamacpp_command(path, port, n_parallel=c.max_num_seqs, passthrough=dict(c.args))
        if name == "sglang":
            return sglang_command(
                m.name_or_path,
                port,
                dtype=dtype,
                max_running_requests=c.max_num_seqs,
                passthrough=dict(c.args),
                python=sys.executable,
            )
        if name == "tgi":
            return tgi_command(
                m.name_or_path,
                port,
                dtype=dtype,
                max_batch_size=c.max_num_seqs,
                passthrough=dict(c.args),
            )
    except ValueError as exc:
        keys = [k for p, k in PARAMETER_KEYS.items() if str(exc).startswith(f"{p}=")]
        raise RunError(f"server.launch={name} {''.join(keys[:1])}: {exc}") from exc
    raise RunError(f"server.launch={name}: no preset (allowed: vllm, llamacpp, sglang, tgi)")
