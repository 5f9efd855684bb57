"""What ``+backend=server`` checks before anything starts: that the API key's variable is set;
for a running server (``server.url``), that it answers ``GET /v1/models`` within
``PREFLIGHT_TIMEOUT_S`` and lists the model under the name requests use
(``llem.backends.server.served``); for one llem starts, that the preset ``server.launch`` names
can start here (its Python package is importable with this interpreter, or its program is on
``PATH``; the hint is the documented recipe), and that its command can be built from the point's
keys. A server llem launches cannot be asked what it serves before it starts."""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import sys

from llem.backends.server import speculation
from llem.backends.server.client import api_key
from llem.backends.server.presets import launch_spec
from llem.backends.server.served import (
    PREFLIGHT_TIMEOUT_S,
    not_served,
    served_models,
    served_name,
)
from llem.config.server import Launch, ServerConfig
from llem.errors import RunError
from llem.vocabulary.engine import BackendSections

#: each preset's Python package (started as ``python -m ...``) and how to install it, as
#: docs/engines.md gives it ({venv}: this interpreter's environment, ``sys.prefix``)
LAUNCH_PACKAGES: dict[Launch, tuple[str, str]] = {
    Launch.vllm: ("vllm", "LLEM_VENV=.venv-vllm bash scripts/setup.sh --vllm, then its python"),
    Launch.llamacpp: (
        "llama_cpp",
        "bash scripts/build_llamacpp.sh ~/.cache/llem/wheels {venv} builds the pinned version "
        "and installs it there",
    ),
    Launch.sglang: ("sglang", "pip install 'sglang[all]' in an environment of its own"),
}
#: the presets that start a program of their own (not this interpreter), and how to get it
LAUNCH_PROGRAMS: dict[Launch, tuple[str, str]] = {
    Launch.tgi: (
        "text-generation-launcher",
        "install text-generation-inference, or run its container and measure it with server.url",
    ),
}


def _program_problem(template: str) -> str | None:
    """Why ``server.command``'s program cannot start here (None: it can)."""
    words = shlex.split(template)
    program = words[0] if words else ""
    if shutil.which(program) is not None or (os.sep in program and os.access(program, os.X_OK)):
        return None
    return f"server.command starts '{program}', which is not on PATH (nor an executable file)"


def _running_problems(sections: BackendSections[ServerConfig]) -> list[str]:
    """Whether the running server at ``server.url`` answers and serves the run's model."""
    url = sections.engine.url
    if url is None:
        return []
    try:
        served = served_models(url, api_key(sections.engine.api_key_env), PREFLIGHT_TIMEOUT_S)
    except RunError as exc:
        return [exc.message]
    problem = not_served(served_name(sections), url.rstrip("/"), served)
    return [] if problem is None else [problem]


def preflight_problems(
    sections: BackendSections[ServerConfig], device: str, has_cuda: bool
) -> list[str]:
    if (refused := speculation.refusal(sections, device)) is not None:
        return [refused]
    launch = sections.engine.launch
    if launch is None:
        return _running_problems(sections)
    try:
        api_key(sections.engine.api_key_env)
    except RunError as exc:
        return [exc.message]
    if launch == Launch.command:
        problem = _program_problem(sections.engine.command or "")
        if problem is not None:
            return [problem]
    elif launch in LAUNCH_PROGRAMS:
        program, hint = LAUNCH_PROGRAMS[launch]
        if shutil.which(program) is None:
            return [
                f"server.launch={launch.value} starts '{program}', which is not on PATH ({hint})"
            ]
    else:
        package, hint = LAUNCH_PACKAGES[launch]
        if importlib.util.find_spec(package) is None:
            return [
                f"server.launch={launch.value} starts '{package}' with this interpreter "
                f"({sys.executable}), where it is not installed ({hint.format(venv=sys.prefix)})"
            ]
    try:
        launch_spec(sections, 0)
    except RunError as exc:
        return [exc.message]
    return []
