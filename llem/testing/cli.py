"""Run llem's command line the way a user does, ``python -m llem ...``, in a subprocess.

The one helper the tests and the benches share. The subprocess runs the same llem as the caller
(this checkout's directory comes first on ``PYTHONPATH``), without a display, and by default
without hub access (``offline=False`` lets a bench download the default model).

    proc = run_llem("model=hf", f"model.name_or_path={path}", cwd=tmp_path)
    proc = run_llem(*overrides, multirun=True, timeout=240)
    assert proc.returncode == 0, output(proc)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

# The directory llem is imported from: the checkout (or site-packages for an installed llem).
REPO = Path(__file__).resolve().parents[2]


def llem_env(*, offline: bool = True) -> dict[str, str]:
    """This process's environment for a llem subprocess: ``REPO`` first on ``PYTHONPATH``, no
    ``DISPLAY``, and with ``offline`` the hub switched off (``HF_HUB_OFFLINE``,
    ``TRANSFORMERS_OFFLINE``)."""
    env = dict(os.environ)
    if offline:
        env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env.pop("DISPLAY", None)
    return env


def llem_command(*args: str, multirun: bool = False) -> list[str]:
    """``python -m llem [--multirun] ARGS`` with this interpreter."""
    return [sys.executable, "-m", "llem", *(["--multirun"] if multirun else []), *args]


def run_llem(
    *args: str,
    multirun: bool = False,
    cwd: Path | str = REPO,
    timeout: float | None = 600,
    offline: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m llem [--multirun] ARGS`` in ``cwd`` and wait (at most ``timeout`` s, then
    ``subprocess.TimeoutExpired``); stdout and stderr are captured as text. Never raises for an
    exit status: the caller checks ``returncode`` (``output(proc)`` makes the message)."""
    return subprocess.run(
        llem_command(*args, multirun=multirun),
        cwd=cwd,
        env=llem_env(offline=offline),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def output(proc: subprocess.CompletedProcess[str], chars: int = 4000) -> str:
    """The end of a finished run's stdout and stderr, for an assertion message."""
    return f"--- stdout\n{proc.stdout[-chars:]}\n--- stderr\n{proc.stderr[-chars:]}"


def compose_tiny(model_dir: Path, *overrides: str) -> Any:
    """The composed config (Hydra's compose API) of a run of a tiny local model on the CPU with no
    energy source; ``overrides`` come last."""
    from hydra import compose, initialize_config_module

    from llem.config.store import register_configs

    register_configs()
    base = [
        "model=hf",
        f"model.name_or_path={model_dir}",
        "device=cpu",
        "measurement.energy=none",
    ]
    with initialize_config_module(version_base="1.3", config_module="llem.conf"):
        return compose(config_name="config", overrides=base + list(overrides))


def run_tiny(model_dir: Path, run_dir: Path, *overrides: str) -> dict[str, Any]:
    """One run of :func:`compose_tiny`'s config in this process, by a fresh ``Runner``; returns
    result.json's content."""
    from llem.runner import Runner

    return Runner().run(compose_tiny(model_dir, *overrides), run_dir).to_json()
