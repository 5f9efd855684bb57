"""A SLURM cluster to run sweeps on: the one ``sinfo`` answers for, or the tests skip.

``scripts/slurm/start-local.sh`` starts a single-node cluster on this machine (partition ``debug``;
needs root) and ``scripts/slurm/stop-local.sh`` stops it; ``.ci/run`` runs these tests between the
two. ``LLEM_SLURM_PARTITION`` names another partition (of a real cluster, for instance).
Jobs must read the model and write the sweep, so both live under ``LLEM_CLUSTER_TMP`` (default:
``.cluster-tmp/`` in the checkout, which on a real cluster is usually on a file system the nodes
share), not in the node-local /tmp.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from llem.testing.tinymodel import build_tiny_model

REPO = Path(__file__).resolve().parents[2]
PARTITION = os.environ.get("LLEM_SLURM_PARTITION", "debug")


def _skip_reason() -> str | None:
    if shutil.which("sbatch") is None or shutil.which("squeue") is None:
        return (
            "no SLURM client here (sbatch/squeue not on PATH); "
            "scripts/slurm/start-local.sh starts a local cluster"
        )
    try:
        proc = subprocess.run(
            ["sinfo", "-h", "-p", PARTITION, "-o", "%T"],
            capture_output=True,
            text=True,
            timeout=15,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"sinfo failed ({exc})"
    states = proc.stdout.split()
    if proc.returncode != 0 or not states:
        return f"no SLURM partition {PARTITION!r} answers (sinfo: {proc.stderr.strip() or 'empty'})"
    if not any(s.rstrip("*~#") in {"idle", "mixed", "allocated", "completing"} for s in states):
        return f"partition {PARTITION!r} has no usable node (states: {', '.join(states)})"
    return None


@pytest.fixture(scope="session")
def slurm() -> str:
    """The partition to submit to (skips the test when no cluster answers)."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    return PARTITION


@pytest.fixture(scope="session")
def shared_dir() -> Iterator[Path]:
    """A directory every node can read and write (removed afterwards)."""
    root = Path(os.environ.get("LLEM_CLUSTER_TMP") or REPO / ".cluster-tmp")
    root.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="llem-cluster-", dir=root))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def cluster_model(slurm: str, shared_dir: Path) -> Path:
    """The tiny 2-layer Llama (llem.testing.tinymodel), where the jobs can read it."""
    return build_tiny_model(shared_dir / "tiny-llama")
