"""``python -m llem``: the Hydra entrypoint, its task function, and the exit code of a command.

Exit codes: 0 all runs ok, 2 configuration error, 3 pre-flight failure, 4 one or more runs of a
sweep failed, 130 interrupted, 1 unexpected error (with a traceback in llem.log and on stderr).
Errors are raised, never printed, below ``main``: ``llem.cli.guard`` is the one boundary.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys
from pathlib import Path

from omegaconf import DictConfig

from llem.cli import as_config_error, guard, is_composition_error, normalize_argv
from llem.errors import (
    EXIT_OK,
    EXIT_PREFLIGHT,
    EXIT_SWEEP_FAILED,
    ConfigError,
    LlemError,
    PreflightError,
    first_line,
)
from llem.result import ErrorInfo, SweepPosition, write_record
from llem.sweep.state import STATE, CommandState, Outcome
from llem.sweep.study import explain_composition_error

log = logging.getLogger("llem")


def _discard_run_dir(run_dir: Path) -> None:
    """Remove a run directory that holds no result (a config or pre-flight error stopped it)."""
    if run_dir.is_dir() and not (run_dir / "result.json").exists():
        shutil.rmtree(run_dir, ignore_errors=True)
        with contextlib.suppress(OSError):
            run_dir.parent.rmdir()  # the date folder, when this run was its only content


def _hash_or_none(cfg: DictConfig) -> str | None:
    """The config hash of a point that stopped before running (None if it is not valid)."""
    from llem.config.validate import config_hash
    from llem.runner import prepare

    try:
        return config_hash(prepare(cfg).exp)
    except LlemError:
        return None


def _sweep_position(sweep_dir: str, subdir: str) -> SweepPosition | None:
    """This job's place in llem's sweep plan (None for a sweep llem's sweeper did not plan)."""
    from llem.sweep.plan import read_position

    try:
        index = int(subdir)
    except ValueError:
        return None
    return read_position(Path(sweep_dir), index)


def task(cfg: DictConfig) -> Outcome:
    """The body of every Hydra job: one run.

    A single run raises whatever stops it (``llem.cli.guard`` reports it). In a sweep, a point's
    failure is recorded in its result.json and in the outcome, and the sweep goes on.
    """
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from llem.runner.once import run, summary_line

    STATE.task_started = True
    hc = HydraConfig.get()
    multirun = hc.mode == RunMode.MULTIRUN
    STATE.multirun = STATE.multirun or multirun
    run_dir = Path(hc.runtime.output_dir)
    overrides = list(hc.overrides.task)
    outcome = Outcome(status="ok", overrides=overrides, run_dir=run_dir)
    STATE.job_outcomes.append(outcome)
    if not multirun:
        try:
            result = run(cfg, run_dir, overrides)
        except Exception as exc:
            # Handed to ``invoke`` to raise once Hydra has returned: raised through Hydra, it
            # would print its own "Error executing job" line first.
            if isinstance(exc, (ConfigError, PreflightError)):
                _discard_run_dir(run_dir)
            elif not isinstance(exc, LlemError):
                log.exception("unexpected error")
            outcome.status, outcome.error = "failed", first_line(exc)
            STATE.error = exc
            return outcome
        if result.status == "dry_run":
            print(
                f"dry run: configuration valid, pre-flight passed (device {result.device}); "
                "nothing loaded"
            )
            _discard_run_dir(run_dir)
        else:
            print(summary_line(result, run_dir))
        outcome.status = result.status
        return outcome

    sweep = _sweep_position(str(hc.sweep.dir), str(hc.sweep.subdir))
    try:
        result = run(cfg, run_dir, overrides, reuse_model=bool(cfg.sweep.reuse_model), sweep=sweep)
    except (ConfigError, PreflightError) as exc:
        # Planning has already skipped invalid combinations: an error here is a failed point.
        log.error("%s", exc.message)
        if not (run_dir / "result.json").exists():  # keep a result the run already wrote
            write_record(
                run_dir,
                status="failed",
                error=ErrorInfo(type(exc).__name__, exc.message, exc.hint),
                config_hash=_hash_or_none(cfg),
                overrides=overrides,
                sweep=sweep,
            )
        outcome.status, outcome.error = "failed", exc.message
    except LlemError as exc:
        log.error("%s", exc.message)
        outcome.status, outcome.error = "failed", exc.message
    except Exception as exc:
        log.exception("unexpected error")
        print(f"error: {type(exc).__name__}: {first_line(exc)}", file=sys.stderr)
        outcome.status, outcome.error = "failed", f"{type(exc).__name__}: {first_line(exc)}"
    else:
        if result.status == "dry_run":
            print(
                f"dry run: configuration valid, pre-flight passed (device {result.device}); "
                "nothing loaded"
            )
        else:
            print(summary_line(result, run_dir))
        outcome.status = result.status
    return outcome


HELP = """\
llem: how fast and how energy-efficiently a causal LM generates text.

usage:
  python -m llem [KEY=VALUE ...]                  one run (default: the embedded SmolLM2-135M)
  python -m llem --multirun KEY=A,B [KEY=C,D ...]  a sweep over the grid
  python -m llem dry_run=true --multirun ...       validate and pre-flight every point, load nothing
  python -m llem.report DIR [DIR ...]              table, statistics and plots for finished runs

config groups (choose with GROUP=OPTION; +backend=pytorch adds the optional backend group):
{groups}
examples:
  python -m llem decoder=creative decoder.temperature=0.7 pytorch.batch_size=8
  python -m llem model=hf model.name_or_path=HuggingFaceTB/SmolLM2-360M-Instruct
  python -m llem --multirun pytorch.batch_size=1,4,16 quantization=none,bnb-4bit repeat='range(3)'

python -m llem --cfg job       shows every key of the composed configuration
python -m llem --hydra-help    lists Hydra's own flags (launchers, sweepers, logging)
exit codes: 0 ok, 1 unexpected, 2 configuration error, 3 pre-flight failure, 4 a sweep point failed
"""


def help_text() -> str:
    """llem's --help: the groups and their options, read from the shipped conf/ folder."""
    from importlib import resources

    conf = resources.files("llem").joinpath("conf")
    lines = []
    for group in sorted(p.name for p in conf.iterdir() if p.is_dir() and p.name != "hydra"):
        options = sorted(
            p.name[:-5] for p in conf.joinpath(group).iterdir() if p.name.endswith(".yaml")
        )
        if options:
            lines.append(f"  {group:<13} {', '.join(options)}")
    return HELP.format(groups="\n".join(lines))


def invoke(args: list[str]) -> CommandState:
    """Run one command line (without the program name) through Hydra; raise what stops it.

    Hydra's composition errors come out as one-line ``ConfigError`` s. Returns what the command
    recorded (outcomes, sweep directory), which ``exit_code`` turns into the exit code.
    """
    import hydra

    from llem.config.store import register_configs

    register_configs()
    STATE.reset()
    argv = normalize_argv(args)
    saved_argv, saved_full_error = sys.argv, os.environ.get("HYDRA_FULL_ERROR")
    sys.argv = [saved_argv[0] if saved_argv else "llem", *argv]
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra re-raises instead of printing and exiting
    try:
        hydra.main(version_base="1.3", config_path="conf", config_name="config")(task)()
        if STATE.error is not None:
            raise STATE.error
    except LlemError:
        raise
    except Exception as exc:
        if not STATE.task_started and is_composition_error(exc):
            raise explain_composition_error(exc, argv) or as_config_error(exc) from None
        raise
    finally:
        sys.argv = saved_argv
        if saved_full_error is None:
            os.environ.pop("HYDRA_FULL_ERROR", None)
        else:
            os.environ["HYDRA_FULL_ERROR"] = saved_full_error
    return STATE


def exit_code(state: CommandState) -> int:
    if state.dry_run_preflight_failed:
        return EXIT_PREFLIGHT
    if state.multirun and state.any_failed():
        return EXIT_SWEEP_FAILED
    return EXIT_OK


def _interrupted() -> str:
    where = STATE.sweep_dir
    return "interrupted: finished runs are kept; nothing unfinished is marked ok" + (
        f"; resume with hydra.sweep.dir={where}" if where else ""
    )


def _command(args: list[str]) -> int:
    try:
        return exit_code(invoke(args))
    except SystemExit as exc:  # Hydra's own exits (--version, --shell-completion, ...)
        if exc.code is None or isinstance(exc.code, int):
            return int(exc.code or 0)
        print(exc.code, file=sys.stderr)
        return 1


def main(argv: list[str] | None = None) -> int:
    """Run the command line (``argv`` without the program name); return the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "--help" in args or "-h" in args:
        print(help_text(), end="")
        return EXIT_OK
    return guard(lambda: _command(args), interrupted=_interrupted)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
