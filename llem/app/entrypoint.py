"""``python -m llem``: the Hydra entrypoint, its task function, and the exit code of a command.

Exit codes: 0 all runs ok, 2 configuration error, 3 pre-flight failure (also: the sweep directory
is in use by another sweep), 4 one or more runs of a sweep failed, 130 interrupted, 1 a single
run that failed once started (one ``error:`` line; its result.json says failed) or an unexpected
error (with a traceback in llem.log and on stderr). Errors are raised, never printed, below
``main``: ``llem.app.boundary.guard`` is the one boundary.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from omegaconf import DictConfig

from llem.app.argv import help_text, normalize_argv, wants_help
from llem.app.boundary import guard
from llem.app.command import Command
from llem.app.job import run_task
from llem.app.sigterm import sigterm_unwinds
from llem.config.store import register_configs
from llem.errors import EXIT_OK, LlemError
from llem.hydra.errors import as_config_error, explain_composition_error, is_composition_error
from llem.sweep.outcomes import LISTENER_ATTRIBUTE, JobOutcome

# llem/conf, relative to this module's package (Hydra records it as pkg://llem/conf).
CONFIG_PATH = "../conf"


def task_function(command: Command) -> Callable[[DictConfig], JobOutcome]:
    """Hydra's task function for ``command``; llem's sweeper finds the command on it."""

    def task(cfg: DictConfig) -> JobOutcome:
        """One Hydra job: a run, or one point of a sweep."""
        return run_task(cfg, command)

    setattr(task, LISTENER_ATTRIBUTE, command)
    return task


def invoke(args: list[str], command: Command | None = None) -> Command:
    """Run one command line (without the program name) through Hydra; raise what stops it.

    Hydra's composition errors come out as one-line ``ConfigError`` s. Returns the command's
    record (outcomes, sweep directory), whose ``exit_code`` is the command's exit code.
    """
    import hydra

    command = command if command is not None else Command()
    register_configs()
    argv = normalize_argv(args)
    saved_argv, saved_full_error = sys.argv, os.environ.get("HYDRA_FULL_ERROR")
    sys.argv = [saved_argv[0] if saved_argv else "llem", *argv]  # what hydra.main parses
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra re-raises instead of printing and exiting
    try:
        main_function = hydra.main(
            version_base="1.3", config_path=CONFIG_PATH, config_name="config"
        )
        main_function(task_function(command))()
        if command.error is not None:
            raise command.error
    except Exception as exc:
        _raise_as_llem_error(exc, command, argv)
        raise
    finally:
        sys.argv = saved_argv
        if saved_full_error is None:
            os.environ.pop("HYDRA_FULL_ERROR", None)
        else:
            os.environ["HYDRA_FULL_ERROR"] = saved_full_error
        command.close()
    return command


def run_overrides(overrides: list[str], command: Command | None = None) -> Command:
    """One run of ``overrides`` (no flags, no sweep) through Hydra's compose API.

    The same job as ``python -m llem OVERRIDES...`` (run directory, ``.hydra/`` files, job
    logging, callbacks), without reading or rewriting ``sys.argv``. Raises what stops the run, as
    ``invoke`` does.
    """
    from hydra import compose, initialize_config_module
    from hydra._internal.callbacks import Callbacks
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.utils import run_job
    from hydra.types import HydraContext

    command = command if command is not None else Command()
    register_configs()
    recorded = [*overrides, "hydra.mode=RUN"]  # as Hydra records a run started from the shell
    try:
        with initialize_config_module(config_module="llem.conf", version_base="1.3"):
            cfg = compose(config_name="config", overrides=recorded, return_hydra_config=True)
            callbacks = Callbacks(cfg)
            callbacks.on_run_start(config=cfg, config_name="config")
            loader = GlobalHydra.instance().config_loader()
            ret = run_job(
                hydra_context=HydraContext(config_loader=loader, callbacks=callbacks),
                task_function=task_function(command),
                config=cfg,
                job_dir_key="hydra.run.dir",
                job_subdir_key=None,
            )
            callbacks.on_run_end(config=cfg, config_name="config", job_return=ret)
            _ = ret.return_value  # a job that raised raises here
        if command.error is not None:
            raise command.error
    except Exception as exc:
        _raise_as_llem_error(exc, command, overrides)
        raise
    finally:
        command.close()
    return command


def _raise_as_llem_error(exc: Exception, command: Command, overrides: list[str]) -> None:
    """A composition error before any job started is raised as one ``ConfigError`` line;
    anything else (llem's own errors included) returns, for the caller to re-raise as it is."""
    if isinstance(exc, LlemError) or command.task_started or not is_composition_error(exc):
        return
    raise explain_composition_error(exc, overrides) or as_config_error(exc) from None


def _command(args: list[str], command: Command) -> int:
    try:
        return invoke(args, command).exit_code()
    except SystemExit as exc:  # Hydra's own exits (--version, --shell-completion, ...)
        if exc.code is None or isinstance(exc.code, int):
            return int(exc.code or 0)
        print(exc.code, file=sys.stderr)
        return 1


def main(argv: list[str] | None = None) -> int:
    """Run the command line (``argv`` without the program name); return the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if wants_help(args):
        print(help_text(), end="")
        return EXIT_OK
    command = Command(argv=args)
    with sigterm_unwinds():  # SIGTERM stops what the command started, as Ctrl-C does
        return guard(lambda: _command(args, command), interrupted=command.interrupted)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
