"""The ``server:`` group: ``+backend=server``, any OpenAI-compatible server.

A run measures either a server that is already running (``server.url``) or one that llem starts
for the point (``server.launch``, a preset: ``vllm``, ``llamacpp``, ``sglang`` or ``tgi``, or
``command``: the command line ``server.command`` gives, a template whose placeholders
``COMMAND_FIELDS`` lists); exactly one of the two is set (``server_problems``). The typed launch
keys (``max_num_seqs``) and the passthrough ``args`` go to a preset's command line;
``api_key_env`` names the environment variable that holds the API key (the key itself is never
written to any file llem writes). Answers are streamed and prompts sent as token ids, except
where the server cannot take them (``stream``, ``prompt_token_ids``; llama-cpp-python's server
by default).
"""

from __future__ import annotations

import shlex
import string
from dataclasses import dataclass, fields
from enum import Enum
from typing import Any

from llem.config.knobs import LLEM, Destination, knob
from llem.config.vllm import VLLMConfig

LAUNCH = Destination(
    "server launch", "an argument of the server command that `server.launch` starts"
)


class Launch(Enum):
    vllm = "vllm"
    llamacpp = "llamacpp"
    sglang = "sglang"
    tgi = "tgi"
    command = "command"  # server.command, a template of one's own


#: the placeholders of ``server.command``: the model as a directory (llem's converted copy of a
#: GGUF file) or the GGUF file itself, where to listen, the name requests use, the batch limit
#: and the dtype
COMMAND_FIELDS = ("model", "gguf", "host", "port", "served", "max_num_seqs", "dtype")


class Endpoint(Enum):
    completions = "completions"
    chat = "chat"


@dataclass
class ServerConfig:
    url: str | None = knob(
        None,
        doc="Base URL of a running OpenAI-compatible server (http://127.0.0.1:8000); "
        "exactly one of url and launch.",
        goes_to=LLEM,
    )
    launch: Launch | None = knob(
        None,
        doc="Start a server for the point with this preset (vllm, llamacpp, sglang, tgi), or "
        "command: server.command's; exactly one of url and launch.",
        goes_to=LLEM,
    )
    command: str | None = knob(
        None,
        doc="The command server.launch=command starts (split as a shell would, run without one): "
        "a template with {model} (the model's directory; a GGUF model's converted copy), {gguf} "
        "(the GGUF file), {host}, {port}, {served} (the model name requests use), "
        "{max_num_seqs} and {dtype}, e.g. 'trtllm-serve {model} --host {host} --port {port}'.",
        goes_to=LAUNCH,
    )
    model: str | None = knob(
        None,
        doc="The served model's name in requests; null: model.name_or_path.",
        goes_to=LLEM,
    )
    port: int | None = knob(
        None,
        doc="Port of the launched server (launch only); null: a free port.",
        goes_to=LAUNCH,
        ge=1,
        le=65535,
    )
    endpoint: Endpoint = knob(
        Endpoint.completions,
        doc="completions: /v1/completions (token-id prompts); chat: /v1/chat/completions.",
        goes_to=LLEM,
    )
    stream: bool | None = knob(
        None,
        doc="Stream each answer: per-token times (TTFT, ITL, TPOT). false: ask for each answer "
        "whole, for a server whose stream carries no usage (llama-cpp-python's): usage, E2E and "
        "throughput, no per-token times. null: false for server.launch=llamacpp, else true.",
        goes_to=LLEM,
    )
    prompt_token_ids: bool | None = knob(
        None,
        doc="Send a tokenized prompt as token ids (completions endpoint); false: as its text, "
        "for a server that takes text prompts only (llama-cpp-python's). null: false for "
        "server.launch=llamacpp, else true.",
        goes_to=LLEM,
    )
    ready_timeout_s: float = knob(
        600.0, doc="Seconds a launched server has to become ready.", goes_to=LLEM, gt=0
    )
    request_timeout_s: float = knob(
        600.0, doc="Seconds one request has to complete.", goes_to=LLEM, gt=0
    )
    api_key_env: str | None = knob(
        None,
        doc="Name of the environment variable holding the API key (the key is never written).",
        goes_to=LLEM,
    )
    gpus: list[int] | None = knob(
        None,
        doc="GPU indices an external server (url) or server.command's runs on, for its energy, "
        "measured whatever llem's own torch sees (null with server.url: energy null with the "
        "reason, unless measurement.gpu_indices names them; null with server.command: the first "
        "GPU where llem runs on CUDA, else none).",
        goes_to=LLEM,
        ge=0,
    )
    pids: list[int] | None = knob(
        None,
        doc="Process ids of a running server (url), each with its descendants: its processes on "
        "the measured GPUs are the server's, any other is foreign work. null: the process "
        "listening on the URL's port, where it can be found on this host.",
        goes_to=LLEM,
        ge=2,
    )
    max_num_seqs: int | None = knob(
        None,
        doc="Requests the server runs together: passed to a launched server (vLLM's "
        "--max-num-seqs, SGLang's --max-running-requests; llama-cpp-python's server runs one at a "
        "time (1 only); TGI has no "
        "such limit: refused); for a running one (server.url), its limit as configured there. "
        "Unset: unknown, and no full-batch steady state is judged.",
        goes_to=LAUNCH,
        ge=1,
    )
    args: dict[str, Any] = knob(
        factory=dict,
        doc="Any other argument of the launched server ({name: value}; true: a bare flag).",
        goes_to=LAUNCH,
    )


#: the presets whose server streams no usage and takes text prompts only (llama-cpp-python's:
#: its streamed chunks carry no ``usage`` and its ``prompt`` is a string or a list of strings)
WHOLE_TEXT_PRESETS = (Launch.llamacpp,)


def streams(config: ServerConfig) -> bool:
    """Whether answers are streamed: ``server.stream``, else per preset (module docstring)."""
    if config.stream is not None:
        return config.stream
    return config.launch not in WHOLE_TEXT_PRESETS


def sends_token_ids(config: ServerConfig) -> bool:
    """Whether a tokenized prompt is sent as token ids: ``server.prompt_token_ids``, else per
    preset."""
    if config.prompt_token_ids is not None:
        return config.prompt_token_ids
    return config.launch not in WHOLE_TEXT_PRESETS


#: keys that configure the launched server, refused with ``server.url``
LAUNCH_ONLY = ("port", "args", "command")


def command_fields(template: str) -> list[str]:
    """The placeholders ``template`` uses (``{name}``); raises ValueError where it is malformed."""
    return [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]


def _command_problems(config: ServerConfig) -> list[str]:
    """What ``server.launch=command`` and ``server.command`` cannot run with."""
    if config.launch != Launch.command:
        if config.command is None:
            return []
        shown = config.launch.value if config.launch else None
        return [f"server.command is started by server.launch=command only (it is {shown})"]
    if not (config.command or "").strip():
        return [
            "server.launch=command needs server.command: the command line that starts the "
            "server, e.g. 'trtllm-serve {model} --host {host} --port {port}'"
        ]
    try:
        used = command_fields(config.command or "")
        shlex.split(config.command or "")  # as it will be split into words
    except ValueError as exc:
        return [f"server.command={config.command!r}: not a template ({exc})"]
    allowed = ", ".join("{" + f + "}" for f in COMMAND_FIELDS)
    p = [
        f"server.command: {{{name}}} is not a placeholder (allowed: {allowed})"
        for name in used
        if name not in COMMAND_FIELDS
    ]
    if "port" not in used and config.port is None:
        p.append(
            "server.command has no {port}: put it where the server takes its port, or set "
            "server.port to the port the command listens on"
        )
    if "max_num_seqs" in used and config.max_num_seqs is None:
        p.append("server.command uses {max_num_seqs}: set server.max_num_seqs")
    if config.args:
        p.append(
            "server.args are a preset's extra arguments; with server.launch=command write them "
            "into server.command"
        )
    return p


def server_problems(config: ServerConfig) -> list[str]:
    """What ``+backend=server`` cannot run with: one line each, naming the keys."""
    if (config.url is None) == (config.launch is None):
        both = "both are set" if config.url is not None else "neither is set"
        allowed = ", ".join(m.value for m in Launch)
        return [
            f"backend=server needs exactly one of server.url (a running server) and "
            f"server.launch ({allowed}): {both}"
        ]
    p: list[str] = []
    if config.url is not None:
        if not config.url.startswith(("http://", "https://")):
            p.append(f"server.url={config.url}: not an http:// or https:// URL")
        defaults = ServerConfig()
        for f in fields(ServerConfig):
            if f.name in LAUNCH_ONLY and getattr(config, f.name) != getattr(defaults, f.name):
                p.append(
                    f"server.{f.name} configures a launched server and does not apply to "
                    f"server.url={config.url}"
                )
    elif config.pids is not None:
        p.append(
            "server.pids names the processes of a server that is already running (server.url); "
            "a launched server's processes are llem's own descendants"
        )
    if config.url is None and config.gpus is not None and config.launch != Launch.command:
        p.append(
            "server.gpus is for a server that is already running (server.url) or started by "
            "server.command; a preset's GPUs come from its own arguments"
        )
    return p + ([] if config.url is not None else _command_problems(config))


def server_equivalent(text: str) -> str:
    return f"server equivalent: {text}"


SERVER_ARG = server_equivalent("+server.args.{name}=VALUE with server.launch=vllm")

# another engine's key -> what to use with the server backend instead
SERVER_INSTEAD = {
    **{
        f"vllm.{f.name}": SERVER_ARG.format(name=f.name)
        for f in fields(VLLMConfig)
        if f.name not in ("max_num_seqs", "engine_kwargs")
    },
    "vllm.max_num_seqs": server_equivalent("server.max_num_seqs"),
    "vllm.engine_kwargs": server_equivalent("+server.args.NAME=VALUE"),
    "pytorch.batch_size": server_equivalent("server.max_num_seqs; the server batches continuously"),
    "pytorch.batching": "a server batches continuously; leave it unset",
    "pytorch.num_threads": server_equivalent("none; the server runs its own threads"),
}
