"""llem from Python: the same composition, validation, run and result directory as the CLI.

    import llem
    r = llem.run(["pytorch.batch_size=4"], output_dir="runs/bs4")
    r.status, r.throughput.output_tokens_per_s, r.energy.j_per_output_token
    df = llem.load_results("outputs/multirun/2026-11-22/10-00-00")

Bad input raises ``llem.ConfigError`` (exit code 2 on the command line) or ``llem.PreflightError``
(3), with the message the command line prints; nothing here calls ``sys.exit`` or touches
``sys.argv``: the configuration is composed through Hydra's compose API.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from llem.app.command import Command
from llem.app.entrypoint import run_overrides
from llem.errors import ConfigError, LlemError, PreflightError
from llem.result import RunResult

if TYPE_CHECKING:
    import pandas as pd

_SWEEP_FLAGS = ("--multirun", "-m")


def run(overrides: Sequence[str] = (), output_dir: str | Path | None = None) -> RunResult:
    """Run one configuration as ``python -m llem OVERRIDES...`` would; return its result.

    ``output_dir`` is the run directory (default: Hydra's ``outputs/DATE/TIME`` under the current
    directory). A run that started and then failed (out of memory, a model that would not load)
    returns its result with ``status == "failed"`` and ``error`` set, as it is written on disk.
    With ``dry_run=true`` nothing runs or is written: the result has status ``dry_run``.
    """
    args = [str(o) for o in overrides]
    if any(a in _SWEEP_FLAGS for a in args):
        raise ConfigError(
            "llem.run runs one configuration: --multirun is for the command line",
            hint="call llem.run once per configuration, or run the sweep with python -m llem",
        )
    flags = [a for a in args if a.startswith("-")]
    if flags:
        raise ConfigError(
            f"llem.run takes overrides (KEY=VALUE), not command-line flags: {' '.join(flags)}",
            hint="run python -m llem for Hydra's flags (--cfg, --info, ...)",
        )
    if output_dir is not None:
        args.append(f"hydra.run.dir={Path(output_dir)}")
    command = Command()
    try:
        run_overrides(args, command)
    except (ConfigError, PreflightError):
        raise
    except Exception:
        # The run started and failed: its result.json says how (as on the command line).
        jobs = command.job_outcomes
        written = _written(jobs[-1].run_dir) if jobs else None
        if written is None:
            raise
        return written
    if not command.job_outcomes:
        raise ConfigError("nothing ran: the overrides selected no job")
    outcome = command.job_outcomes[-1]
    if outcome.status == "dry_run":
        return RunResult(status="dry_run", overrides=args)
    written = _written(outcome.run_dir)
    if written is None:
        raise LlemError(f"the run finished but wrote no readable result in {outcome.run_dir}")
    return written


def _written(run_dir: Path | None) -> RunResult | None:
    return RunResult.read(run_dir) if run_dir is not None else None


def load_results(*dirs: str | Path) -> pd.DataFrame:
    """Every run under ``dirs`` as one table: the same columns and rows as ``results.csv``."""
    from llem.report.load import load_runs

    if not dirs:
        raise ConfigError("load_results needs at least one directory")
    return load_runs(list(dirs)).frame
