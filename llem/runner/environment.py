"""A snapshot of the software and hardware a run used, written as ``environment.json``.

Captured before the model loads. Every probe is guarded: one that fails leaves its value ``null``
and records why under ``unavailable`` (``{key: reason}``); capturing never raises.

GPUs are listed in NVML order (NVML indices, which follow PCI bus order and ignore
``CUDA_VISIBLE_DEVICES``); ``cuda_visible_devices`` records that variable separately so that the
torch device numbering of a run can be mapped onto this list. ``memory_total_mb`` values are MiB.

The installed distributions (``packages``, ``pip_freeze``: a scan of every distribution's metadata,
most of a snapshot's cost) are read once per process and interpreter search path, so the points of
an in-process sweep do not each pay for it; every other probe runs at every capture.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Union

from llem.atomic import atomic_write_text
from llem.config.engines import ENGINES
from llem.devices.gpu import GpuOpener, GpuUnavailable
from llem.devices.gpus import open_gpus
from llem.version import __version__

# Distribution names (as pip knows them) whose versions are recorded under "packages": the
# common stack, then every engine's packages (its row in llem.config.engines).
_STACK = (
    "torch",
    "transformers",
    "accelerate",
    "bitsandbytes",
    "hydra-core",
    "omegaconf",
    "nvidia-ml-py",
    "gguf",
)
PACKAGES = tuple(dict.fromkeys([*_STACK, *(p for row in ENGINES for p in row.packages)]))
DEFAULT_CUDA_HOME = "/usr/local/cuda"
NVCC_TIMEOUT_S = 5.0

PathLike = Union[str, "os.PathLike[str]"]


class _Unavailable(Exception):
    """Raised by a probe to report ``null`` with this exact reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def capture_environment(cuda_home: PathLike | None = None, gpus: GpuOpener = open_gpus) -> dict:
    """Return the environment snapshot as a JSON-ready dict; never raises.

    ``cuda_home`` overrides where the CUDA toolkit is looked for (default: ``$CUDA_HOME``, then
    ``$CUDA_PATH``, then ``/usr/local/cuda``); it is consulted only when torch is not a CUDA build.
    ``gpus`` opens the vendor library (a run's own ``RunGpus``).
    """
    unavailable: dict[str, str] = {}

    def probe(key: str, fn: Callable[[], Any], default: Any = None) -> Any:
        try:
            return fn()
        except _Unavailable as exc:
            unavailable[key] = exc.reason
        except Exception as exc:  # a broken probe must not stop the run
            unavailable[key] = f"{type(exc).__name__}: {exc}"
        return default

    env: dict[str, Any] = {
        "captured_at": _now(),
        "llem": {"version": __version__, "location": str(Path(__file__).parent.parent)},
    }
    env["python"] = probe("python", _python)
    env["packages"] = probe("packages", lambda: dict(_installed()[0]))
    env["torch"] = probe("torch", _torch)
    env["cuda"] = probe("cuda", lambda: _cuda(cuda_home), default={"version": None, "source": None})

    found = probe("gpus", lambda: _gpus(gpus), default={})
    env["gpu_vendor"] = found.get("vendor")
    env["driver_version"] = found.get("driver_version")
    env["gpus"] = found.get("gpus", [])
    env["gpus_unavailable_reason"] = unavailable.get("gpus")
    if "gpus" in unavailable:
        unavailable.setdefault("driver_version", unavailable["gpus"])
    unavailable.update(found.get("unavailable", {}))
    env["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")

    cpu = probe("cpu", _cpu)
    if cpu is not None:
        unavailable.update(cpu.pop("unavailable"))
    env["cpu"] = cpu
    env["memory_total_mb"] = probe("memory_total_mb", _memory_total_mb)
    env["os"] = probe(
        "os",
        lambda: {
            "platform": platform.platform(),
            "system": platform.system(),
            "release": platform.release(),
        },
    )
    env["hostname"] = probe("hostname", socket.gethostname)
    env["pip_freeze"] = probe("pip_freeze", lambda: list(_installed()[1]), default=[])
    env["unavailable"] = unavailable
    return env


class EnvironmentCache:
    """The snapshot captured once per process (and again when ``CUDA_VISIBLE_DEVICES`` changes);
    each copy handed out carries the time it was asked for."""

    def __init__(self) -> None:
        self._key: str | None = None
        self._env: dict[str, Any] | None = None

    def snapshot(self, gpus: GpuOpener = open_gpus) -> dict[str, Any]:
        key = os.environ.get("CUDA_VISIBLE_DEVICES", "\0unset")
        if self._env is None or key != self._key:
            self._env, self._key = capture_environment(gpus=gpus), key
            return dict(self._env)
        return {**self._env, "captured_at": _now()}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def write_environment(path: PathLike, env: dict | None = None) -> Path:
    """Write ``env`` (captured now when None) to ``path`` as indented JSON, atomically.

    The JSON goes to a temporary file in the same directory first and is then moved over ``path``
    with ``os.replace``, so a reader sees either the old file or the complete new one.
    """
    path = Path(path)
    if env is None:
        env = capture_environment()
    atomic_write_text(path, json.dumps(env, indent=2, default=str) + "\n")
    return path


# --- probes --------------------------------------------------------------------------------------


def _python() -> dict:
    return {
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
    }


_INSTALLED: dict[tuple[str, ...], tuple[dict, list[str]]] = {}


def _installed() -> tuple[dict, list[str]]:
    """(``packages``, ``pip_freeze``), read once per process and ``sys.path``."""
    key = tuple(sys.path)
    if key not in _INSTALLED:
        _INSTALLED[key] = (_packages(), _pip_freeze())
    return _INSTALLED[key]


def _packages() -> dict:
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _pip_freeze() -> list[str]:
    """``name==version`` for every installed distribution, like ``pip freeze`` but in-process."""
    seen: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if not name:
            continue
        key = re.sub(r"[-_.]+", "-", name).lower()
        seen.setdefault(key, f"{name}=={dist.version}")
    return sorted(seen.values(), key=str.lower)


def _torch() -> dict:
    try:
        import torch
    except ImportError as exc:
        raise _Unavailable(f"torch cannot be imported ({exc})") from None
    return {
        "version": str(torch.__version__),
        "cuda_available": bool(torch.cuda.is_available()),
        "cuda_device_count": int(torch.cuda.device_count()),
    }


def _torch_cuda_version() -> str | None:
    """The CUDA version torch was built with; None for a CPU build or when torch is missing."""
    try:
        import torch
    except ImportError:
        return None
    return torch.version.cuda


def _cuda(cuda_home: PathLike | None = None) -> dict:
    """The CUDA version and where it came from: torch, the toolkit's version file, or nvcc."""
    version = _torch_cuda_version()
    if version:
        return {"version": str(version), "source": "torch"}

    home = Path(
        cuda_home or os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or DEFAULT_CUDA_HOME
    )
    version = _cuda_version_txt(home / "version.txt")
    if version:
        return {"version": version, "source": "version.txt"}
    version = _cuda_version_json(home / "version.json")
    if version:
        return {"version": version, "source": "version.json"}

    nvcc = shutil.which("nvcc")
    version = _nvcc_version(nvcc) if nvcc else None
    if version:
        return {"version": version, "source": "nvcc"}
    raise _Unavailable(
        f"no CUDA found: torch is not a CUDA build, {home} has no readable version.txt or "
        f"version.json, and {'nvcc gave no version' if nvcc else 'no nvcc is on PATH'}"
    )


def _cuda_version_txt(path: Path) -> str | None:
    with contextlib.suppress(OSError, UnicodeDecodeError):
        match = re.search(r"CUDA Version\s+(\d+(?:\.\d+)*)", path.read_text(encoding="utf-8"))
        if match:
            return match.group(1)
    return None


def _cuda_version_json(path: Path) -> str | None:
    with contextlib.suppress(OSError, ValueError, AttributeError, TypeError):
        version = json.loads(path.read_text(encoding="utf-8"))["cuda"]["version"]
        if isinstance(version, str) and version:
            return version
    return None


def _nvcc_version(nvcc: str) -> str | None:
    try:
        out = subprocess.run(
            [nvcc, "--version"],
            capture_output=True,
            text=True,
            timeout=NVCC_TIMEOUT_S,
            check=False,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    # "Cuda compilation tools, release 12.4, V12.4.131"
    match = re.search(r"release\s+[\d.]+,\s*V(\d+(?:\.\d+)+)", out) or re.search(
        r"release\s+(\d+(?:\.\d+)+)", out
    )
    return match.group(1) if match else None


def _gpus(gpus: GpuOpener) -> dict:
    """Driver version and every GPU the vendor library sees; raises _Unavailable when no GPU
    library can start."""
    try:
        lib = gpus()
    except GpuUnavailable as exc:
        raise _Unavailable(f"NVML is unavailable ({exc})") from None
    try:
        return {"vendor": lib.vendor, **lib.snapshot()}
    finally:
        lib.shutdown()


def _text(value: Any) -> str:
    """NVML strings are ``bytes`` in older bindings and ``str`` in newer ones."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _cpu() -> dict[str, Any]:
    unavailable: dict[str, str] = {}
    model, cores = _parse_cpuinfo()
    if model is None:
        model = platform.processor() or None
        if model is None:
            unavailable["cpu.model"] = "neither /proc/cpuinfo nor platform.processor() names it"
    if not cores:
        unavailable["cpu.physical_cores"] = "/proc/cpuinfo lists no core ids"
    usable: int | None = None
    if hasattr(os, "sched_getaffinity"):
        with contextlib.suppress(OSError):
            usable = len(os.sched_getaffinity(0))
    return {
        "model": model,
        "physical_cores": len(cores) or None,
        "logical_cores": os.cpu_count(),
        "usable_cores": usable,  # cores this process may run on (affinity, cgroup cpusets)
        "unavailable": unavailable,
    }


def _parse_cpuinfo() -> tuple[str | None, set[tuple[str, str]]]:
    """The CPU's model name and its (physical id, core id) pairs, from /proc/cpuinfo."""
    model: str | None = None
    cores: set[tuple[str, str]] = set()
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        cpuinfo = ""
    physical_id = "0"
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "processor":
            physical_id = "0"
        elif key == "model name" and model is None:
            model = value or None
        elif key == "physical id":
            physical_id = value
        elif key == "core id":
            cores.add((physical_id, value))
    return model, cores


def _memory_total_mb() -> int:
    try:
        meminfo = Path("/proc/meminfo").read_text(encoding="utf-8")
    except OSError:
        meminfo = ""
    match = re.search(r"^MemTotal:\s+(\d+)\s*kB", meminfo, re.MULTILINE)
    if match:
        return int(match.group(1)) // 1024
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    except (AttributeError, ValueError, OSError):
        raise _Unavailable("no MemTotal in /proc/meminfo and no sysconf fallback") from None
