"""The engines llem knows: one table, one row per engine, and the rules that tie an engine to the
rest of the tree.

Each row (``Engine``) says everything the other layers need to know of an engine: its name
(``+backend=NAME``), its config section, its driver module, the packages it needs and how to
install them, which knob bounds its requests in flight, its pre-flight checks, who sets its CPU
threads, whether offline traffic goes through ``serve``, and what to use with it instead of
another engine's keys. The run layer asks the row; no module outside the engine's own package
compares engine names. The table lives in the configuration layer so that validating a
configuration never imports an engine: the driver and its pre-flight are module paths.

``engine_problems(exp)`` lists what the chosen engine cannot honour, each naming its keys: one
generic rule (another engine's key set under this backend) and the engine's own rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from llem.config.batching import pytorch_batching_problems
from llem.config.pytorch import Batching, PyTorchConfig
from llem.config.schema import ExperimentConfig
from llem.config.server import SERVER_INSTEAD, ServerConfig, server_problems
from llem.config.vllm import VLLM_INSTEAD, VLLMConfig


@dataclass(frozen=True)
class Engine:
    """One engine: what the configuration, run and report layers need to know of it."""

    name: str  # +backend=NAME, and ExperimentConfig.backend
    section: str  # its section's attribute on ExperimentConfig (``exp.<section>``)
    config: type[Any]  # its section's dataclass
    driver: str  # module with ``create_backend(sections) -> Backend``
    packages: tuple[str, ...]  # importable for it to work; the first one detects it as default
    concurrency_knob: str  # the key bounding its requests in flight (messages, plots)
    install_hint: str | None = None  # how to install packages[0], for pre-flight messages
    # "module:function" with (sections, device, has_cuda) -> list[str], run before any load
    preflight: str | None = None
    threads_knob: str | None = None  # llem sets torch's threads, from this key when given
    threads_reason: str | None = None  # else: why llem sets none (the engine runs its own)
    # given its section: whether offline traffic goes through ``serve`` instead of ``generate``
    offline_serves: Callable[[Any], bool] = lambda _section: False
    # its ``serve`` drops decoder.min_new_tokens (random weights then hold no EOS instead)
    serve_drops_min_new_tokens: bool = False
    # another engine's key -> what to use with this engine instead (refused when not default)
    instead: Mapping[str, str] = field(default_factory=dict)
    # its own rules against the rest of the configuration, checked when it is the backend
    rules: Callable[[ExperimentConfig], list[str]] = lambda _exp: []
    # ``quantization`` (bitsandbytes) and ``passthrough_kwargs`` (from_pretrained's): what to use
    # instead with this engine, which refuses them (transformers-only shared keys)
    shared_instead: Mapping[str, str] = field(default_factory=dict)
    # the speculative methods it runs (``speculative=METHOD``); another is refused in pre-flight
    speculative: tuple[str, ...] = ("none",)


def _not_transformers(exp: ExperimentConfig, row: Engine) -> list[str]:
    """The shared keys only transformers reads (bitsandbytes quantisation, ``passthrough_kwargs``:
    from_pretrained's arguments), refused under an engine whose row says what to use instead."""
    p: list[str] = []
    q = exp.quantization
    if "quantization" in row.shared_instead and (q.load_in_4bit or q.load_in_8bit):
        which = "bnb-4bit" if q.load_in_4bit else "bnb-8bit"
        p.append(
            f"quantization={which} is the transformers bitsandbytes path and does not apply to "
            f"backend={row.name} (use {row.shared_instead['quantization']})"
        )
    if "passthrough_kwargs" in row.shared_instead and exp.passthrough_kwargs:
        keys = ", ".join(sorted(str(k) for k in exp.passthrough_kwargs))
        p.append(
            f"passthrough_kwargs ({keys}) are from_pretrained arguments and do not apply to "
            f"backend={row.name} (use {row.shared_instead['passthrough_kwargs']})"
        )
    return p


def _continuous(section: PyTorchConfig) -> bool:
    return section.batching == Batching.continuous


# The table, in detection order: with no backend named, the first whose package imports is used.
ENGINES: tuple[Engine, ...] = (
    Engine(
        name="pytorch",
        section="pytorch",
        config=PyTorchConfig,
        driver="llem.backends.pytorch",
        packages=("transformers", "torch"),
        concurrency_knob="pytorch.batch_size",
        preflight="llem.backends.pytorch.preflight:preflight_problems",
        threads_knob="pytorch.num_threads",
        offline_serves=_continuous,
        serve_drops_min_new_tokens=True,
        rules=pytorch_batching_problems,
        speculative=("none", "ngram", "draft"),
    ),
    Engine(
        name="vllm",
        section="vllm",
        config=VLLMConfig,
        driver="llem.backends.vllm",
        packages=("vllm", "torch"),
        concurrency_knob="vllm.max_num_seqs",
        install_hint="pip install 'llem[vllm]' on a GPU machine, or "
        "LLEM_VENV=.venv-vllm bash scripts/setup.sh --vllm on any machine",
        preflight="llem.backends.vllm:preflight_problems",
        threads_reason="the vLLM engine runs in its own processes with vLLM's own CPU threads "
        "(VLLM_CPU_OMP_THREADS_BIND on the CPU); llem does not set them",
        instead=VLLM_INSTEAD,
        speculative=("none", "ngram", "draft"),
        shared_instead={
            "quantization": "quantization=none vllm.quantization=bitsandbytes",
            "passthrough_kwargs": "+vllm.engine_kwargs.<engine argument>=VALUE",
        },
    ),
    Engine(
        name="server",
        section="server",
        config=ServerConfig,
        driver="llem.backends.server",
        # transformers first: it is the tokenizer's, and never makes the server the default
        packages=("transformers", "aiohttp"),
        concurrency_knob="server.max_num_seqs",
        preflight="llem.backends.server.preflight:preflight_problems",
        threads_reason="the server runs in its own processes with its own CPU threads; llem "
        "does not set them",
        offline_serves=lambda _section: True,
        instead=SERVER_INSTEAD,
        rules=lambda exp: server_problems(exp.server),
        speculative=(
            "none",
            "ngram",
            "draft",
        ),  # with server.launch=vllm or sglang (its pre-flight)
        shared_instead={
            "quantization": "quantization=none and the server's own argument in +server.args",
            "passthrough_kwargs": "+server.args.NAME=VALUE",
        },
    ),
)


def engines() -> dict[str, Engine]:
    """Every engine by name, in detection order (the table; tests may plant a row here)."""
    return {e.name: e for e in ENGINES}


def default_name() -> str:
    """The engine a configuration without a backend is validated against (the first row)."""
    return ENGINES[0].name


def engine(name: str) -> Engine:
    """The row of engine ``name`` (KeyError when there is none)."""
    return engines()[name]


def active_engine(exp: ExperimentConfig) -> Engine:
    """The row of the engine ``exp`` runs on: its backend, or the default when none is named."""
    return engine(exp.backend or default_name())


def known_backends() -> list[str]:
    return sorted(engines())


def install_hint(package: str) -> str | None:
    """How to install ``package``, where an engine's row says."""
    return next((e.install_hint for e in ENGINES if e.packages[0] == package), None)


def value_of(exp: ExperimentConfig, dotted: str) -> Any:
    """The value of ``section.key`` in ``exp`` (``pytorch.num_threads``)."""
    node: Any = exp
    for part in dotted.split("."):
        node = getattr(node, part)
    return node


def speculative_refusal(exp: ExperimentConfig, row: Engine) -> str | None:
    """The line refusing ``speculative=METHOD`` on an engine whose row does not run it (a
    pre-flight failure), or None."""
    method = exp.speculative.method.value
    if method in row.speculative:
        return None
    return (
        f"speculative={method}: backend={row.name} cannot run it in llem "
        f"(it can: speculative={'|'.join(row.speculative)})"
    )


def engine_problems(exp: ExperimentConfig) -> list[str]:
    """Every rule between the engine and the rest of the configuration that ``exp`` breaks: other
    engines' keys (``foreign_key_problems``), then the engine's own ``rules``. An unknown backend
    is reported, and the rest checked as under the default engine."""
    table = engines()
    backend = table.get(exp.backend or default_name(), table[default_name()])
    p = [
        *foreign_key_problems(exp, backend),
        *backend.rules(exp),
        *_not_transformers(exp, backend),
    ]
    if exp.backend is not None and exp.backend not in table:
        p.append(f"backend={exp.backend}: unknown backend (allowed: {', '.join(known_backends())})")
    return p


def _show(value: Any) -> str:
    if hasattr(value, "value"):  # Enum
        return str(value.value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def foreign_key_problems(exp: ExperimentConfig, backend: Engine) -> list[str]:
    """Every key of another engine's section that ``exp`` sets (not its default) while the
    backend is ``backend``: with what to use instead where ``backend``'s row says, else with the
    ``+backend=`` that it needs."""
    p: list[str] = []
    now = exp.backend or f"the default, {default_name()}"
    for other in engines().values():
        if other.section == backend.section:
            continue
        section = getattr(exp, other.section)
        defaults = other.config()
        for f in fields(other.config):
            value = getattr(section, f.name)
            if value == getattr(defaults, f.name):
                continue
            key = f"{other.section}.{f.name}"
            if key in backend.instead:
                p.append(
                    f"{key}={_show(value)} does not apply to backend={backend.name} "
                    f"({backend.instead[key]})"
                )
            else:
                p.append(f"{key}={_show(value)} needs +backend={other.name} (the backend is {now})")
    return p
