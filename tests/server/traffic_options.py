"""Every traffic kind as an option of a sweep's own ``conf/traffic/`` (each kind with its own
keys: a grid of ``traffic=poisson,concurrency`` with ``traffic.rate_per_s`` would give the rate
to the closed loop too, which pre-flight refuses), for the real servers' traffic sweeps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

MAX_CONCURRENCY = 2


def kinds(rate_per_s: float) -> dict[str, dict[str, Any]]:
    """Each traffic kind's keys, the open-loop kinds at ``rate_per_s``."""
    return {
        "offline": {},
        "poisson": {"rate_per_s": rate_per_s, "seed": 1},
        "gamma": {"rate_per_s": rate_per_s, "burstiness": 0.5, "seed": 1},
        "constant": {"rate_per_s": rate_per_s},
        "concurrency": {"max_concurrency": MAX_CONCURRENCY},
    }


def write_kind_options(run_from: Path, rate_per_s: float) -> str:
    """Write ``kind_<kind>.yaml`` for every kind into ``run_from/conf/traffic/``; return the
    override that sweeps them (``traffic=kind_offline,...``)."""
    options = run_from / "conf" / "traffic"
    options.mkdir(parents=True, exist_ok=True)
    for kind, keys in kinds(rate_per_s).items():
        text = "".join(f"{k}: {v}\n" for k, v in {"kind": kind, **keys}.items())
        (options / f"kind_{kind}.yaml").write_text(text)
    return "traffic=" + ",".join(f"kind_{k}" for k in kinds(rate_per_s))
