"""The command ``server.launch`` starts: a preset (``commands.vllm_command``,
``commands.llamacpp_command``, ``commands.sglang_command``, ``commands.tgi_command``) filled from
the point's own keys: the model, its dtype (vLLM, SGLang, TGI), ``server.max_num_seqs``, the
``speculative`` group (vLLM's ``--speculative-config``, SGLang's ``--speculative-*`` flags) and the
passthrough ``server.args``.

The model the server loads is ``checkpoint`` where the caller resolved it (``checkpoint``: a
``pkg:`` model's directory; llem's converted copy of a GGUF file for vLLM, SGLang and TGI, the
GGUF file itself for llama.cpp), ``model.name_or_path`` as written otherwise (pre-flight only
builds the command). The name it serves the model under is the run's (``served``): vLLM's and
SGLang's ``--served-model-name``, llama.cpp's ``--model_alias``, unless ``server.args`` names one.
On the CPU a vLLM server reserves a fraction of *host* memory (``--gpu-memory-utilization``, 0.92
by default, which fails wherever other processes hold more than 8 %): llem passes the in-process
engine's ``CPU_MEMORY_UTILIZATION`` unless ``server.args`` or ``VLLM_CPU_KVCACHE_SPACE`` sizes it.
"""

from __future__ import annotations

import os
import sys

from llem.backends.server import sglang_speculation, speculation
from llem.backends.server.checkpoint import local_path
from llem.backends.server.commands import (
    llamacpp_command,
    sglang_command,
    template_command,
    tgi_command,
    vllm_command,
)
from llem.backends.server.launch import LaunchSpec
from llem.backends.vllm.kwargs import CPU_MEMORY_UTILIZATION
from llem.config.server import ServerConfig
from llem.errors import RunError
from llem.vocabulary.engine import BackendSections

#: the point's key each preset parameter comes from (named in a refusal)
PARAMETER_KEYS = {
    "n_parallel": "server.max_num_seqs",
    "max_batch_size": "server.max_num_seqs",
    "dtype": "model.dtype",
}


#: the option each preset serves the model's name under
SERVED_NAME_OPTION = {
    "vllm": "served_model_name",
    "sglang": "served_model_name",
    "llamacpp": "model_alias",
}


def _memory_sized(args: dict[str, object]) -> bool:
    keys = ("gpu_memory_utilization", "kv_cache_memory_bytes")
    return any(k in args for k in keys) or bool(os.environ.get("VLLM_CPU_KVCACHE_SPACE"))


def _draft(sections: BackendSections[ServerConfig]) -> str | None:
    """The draft model as the server loads it (resolved where it resolves; None: no draft)."""
    from llem.backends.models import resolve_name_or_path

    name = sections.speculative.draft_model
    return resolve_name_or_path(name)[0] if name else None


def _vllm_args(
    sections: BackendSections[ServerConfig], args: dict[str, object], device: str | None
) -> None:
    """The vLLM preset's own additions to ``args``: the speculative group as
    ``--speculative-config`` (nothing for speculative=none; the draft where it resolves), and on
    the CPU the host-memory fraction unless something sizes it."""
    args.update(speculation.launch_args(sections.speculative, _draft(sections)))
    if device == "cpu" and not _memory_sized(args):
        args["gpu_memory_utilization"] = CPU_MEMORY_UTILIZATION


def _speculative_args(
    sections: BackendSections[ServerConfig],
    name: str | None,
    args: dict[str, object],
    device: str | None,
) -> None:
    """The preset's own additions to ``args``: vLLM's (``_vllm_args``), or the speculative group
    as SGLang's flags (none for speculative=none)."""
    if name == "vllm":
        _vllm_args(sections, args, device)
    elif name == "sglang":
        args.update(sglang_speculation.launch_args(sections.speculative, _draft(sections)))


def launch_spec(
    sections: BackendSections[ServerConfig],
    port: int,
    checkpoint: str | None = None,
    served: str | None = None,
    device: str | None = None,
) -> LaunchSpec:
    """The command for ``server.launch`` on ``port`` (this interpreter's Python), loading
    ``checkpoint`` and serving it as ``served`` (see the module docstring)."""
    c, m = sections.engine, sections.model
    name = c.launch.value if c.launch is not None else None
    dtype = m.dtype.value if m.dtype is not None else None
    args = dict(c.args)
    option = SERVED_NAME_OPTION.get(name or "")
    if served is not None and option is not None:
        args.setdefault(option, served)
    _speculative_args(sections, name, args, device)
    model = checkpoint or m.name_or_path
    if name == "command":
        return _from_template(sections, port, model, served)
    try:
        if name == "vllm":
            return vllm_command(
                model,
                port,
                dtype=dtype,
                max_num_seqs=c.max_num_seqs,
                passthrough=args,
                python=sys.executable,
            )
        if name == "llamacpp":
            if checkpoint is None and m.gguf_file:
                model = os.path.join(m.name_or_path, m.gguf_file)
            return llamacpp_command(model, port, n_parallel=c.max_num_seqs, passthrough=args)
        if name == "sglang":
            return sglang_command(
                model,
                port,
                dtype=dtype,
                max_running_requests=c.max_num_seqs,
                passthrough=args,
                python=sys.executable,
            )
        if name == "tgi":
            return tgi_command(
                model,
                port,
                dtype=dtype,
                max_batch_size=c.max_num_seqs,
                passthrough=dict(c.args),
            )
    except ValueError as exc:
        keys = [k for p, k in PARAMETER_KEYS.items() if str(exc).startswith(f"{p}=")]
        raise RunError(f"server.launch={name} {''.join(keys[:1])}: {exc}") from exc
    raise RunError(
        f"server.launch={name}: no preset (allowed: vllm, llamacpp, sglang, tgi, command)"
    )


def _from_template(
    sections: BackendSections[ServerConfig], port: int, model: str, served: str | None
) -> LaunchSpec:
    """``server.command`` filled in: ``{model}`` is what the caller resolved (a directory, or
    the GGUF file where the template has no ``{model}``), ``{gguf}`` the GGUF file."""
    c, m = sections.engine, sections.model
    gguf = None
    if m.gguf_file:
        gguf = os.path.join(local_path(m), m.gguf_file)
    values = {
        "model": model,
        "gguf": gguf,
        "host": "127.0.0.1",
        "port": str(port),
        "served": served or c.model or m.name_or_path,
        "max_num_seqs": None if c.max_num_seqs is None else str(c.max_num_seqs),
        "dtype": m.dtype.value if m.dtype is not None else "auto",
    }
    try:
        return template_command(c.command or "", values)
    except ValueError as exc:
        why = "model.gguf_file is not set" if "{gguf}" in str(exc) else str(exc)
        raise RunError(f"server.command={c.command!r}: {why}") from exc
